// Package realtime is the message contract of a realtime connection: the
// one WebSocket a browser's leader tab holds to the server. Both halves
// import it (the server endpoint in receiver/realtime, the client core in
// realtime) so they cannot drift.
//
// It is a sibling of wire rather than part of it: wire is the HTTP contract
// of one request; this is the vocabulary of a long-lived connection, with its
// own version, codec and close codes. Like wire it is compiled into the
// browser runtime, so it links no fmt, reflect or encoding/*: messages are
// a small binary format written by hand (see codec.go).
//
// Nothing a message carries is a credential: a leader rebroadcasts deltas,
// acks and rejects to its followers on a BroadcastChannel, which any
// same-origin script reads. Authentication stays in the WebSocket upgrade
// (cookies or headers the server checks like the receiver checks a request).
package realtime

import "errors"

// Protocol is the version of this message set. A client sends it in Hello;
// a server that does not speak it closes with CloseProtocol.
const Protocol = 1

// Type tags a message; it is the first byte of every encoded message.
type Type byte

// Message types. Client to server: Hello, Mutation, Ping. Server to client:
// Ready, Delta, Ack, Reject, Pong, Error.
const (
	TypeHello    Type = 1
	TypeReady    Type = 2
	TypeDelta    Type = 3
	TypeMutation Type = 4
	TypeAck      Type = 5
	TypeReject   Type = 6
	TypePing     Type = 7
	TypePong     Type = 8
	TypeError    Type = 9
)

// String names the type for logs.
func (t Type) String() string {
	switch t {
	case TypeHello:
		return "hello"
	case TypeReady:
		return "ready"
	case TypeDelta:
		return "delta"
	case TypeMutation:
		return "mutation"
	case TypeAck:
		return "ack"
	case TypeReject:
		return "reject"
	case TypePing:
		return "ping"
	case TypePong:
		return "pong"
	case TypeError:
		return "error"
	}
	return "unknown"
}

// Message is one decoded message; its concrete type is one of the structs
// below (always a value, never a pointer).
type Message interface{ Type() Type }

// Hello opens a connection: the client's protocol and the replica version
// it holds (0 for an empty replica), so the server can send what it missed.
// User, when set, names the user the replica belongs to, in
// wire.FormatClientUser's form: the server refuses a connection whose
// credentials are another user's (CloseSession), as the receiver refuses
// X-Client-User. It only ever refuses, never authorizes.
type Hello struct {
	Protocol uint64
	Version  uint64
	User     string
}

// Ready answers Hello: the server's current version. When Reset is set the
// server no longer holds the deltas after the client's version: the client
// must reload its replica from a snapshot (deltas then follow from Version).
type Ready struct {
	Version uint64
	Reset   bool
}

// Delta is one change set: it takes a replica at Prev to Version. Changes
// are the application's bytes (typically JSON), opaque here.
type Delta struct {
	Version uint64
	Prev    uint64
	Changes []byte
}

// Mutation is a command from the leader: ID is its idempotency key (the same
// key space as the outbox's HTTP requests, so a resend is applied once), Op
// and Entity name what it does, Payload is the application's bytes.
// Resource and Token are the sender's fencing token (both or neither);
// a fencing token is not a credential, it only orders leaders.
type Mutation struct {
	ID       string
	Op       string
	Entity   string
	Payload  []byte
	Resource string
	Token    uint64
}

// Ack settles a mutation that took effect (now or, with Replayed, earlier).
// Status is the stored answer's status (2xx); Result its body.
type Ack struct {
	ID       string
	Status   uint64
	Replayed bool
	Result   []byte
}

// Reject settles a mutation the server refused. With Retry set nothing was
// stored and the same mutation may be sent again later (the server was busy
// or failed); otherwise the refusal is final and replayed to every resend.
type Reject struct {
	ID      string
	Problem Problem
	Retry   bool
}

// Ping asks for a Pong with the same Nonce; either side measures liveness.
type Ping struct{ Nonce uint64 }

// Pong answers a Ping.
type Pong struct{ Nonce uint64 }

// Error is a connection-level problem sent just before the server closes.
type Error struct{ Problem Problem }

// Problem is the wire's RFC 9457 problem, as a message field: Type is one of
// the wire.Problem* constants (or the application's), Highest is set on a
// stale fencing token.
type Problem struct {
	Type    string
	Title   string
	Detail  string
	Status  uint64
	Highest uint64
}

func (Hello) Type() Type    { return TypeHello }
func (Ready) Type() Type    { return TypeReady }
func (Delta) Type() Type    { return TypeDelta }
func (Mutation) Type() Type { return TypeMutation }
func (Ack) Type() Type      { return TypeAck }
func (Reject) Type() Type   { return TypeReject }
func (Ping) Type() Type     { return TypePing }
func (Pong) Type() Type     { return TypePong }
func (Error) Type() Type    { return TypeError }

// Close codes (WebSocket application range 4000-4999) a server closes with,
// so a client tells the reasons apart without parsing text. 1009 (message
// too big) and 1001 (going away) are the standard codes.
const (
	CloseMalformed    = 4400 // a message that does not decode, or out of order
	CloseUnauthorized = 4401 // the session ended: do not reconnect until asked
	CloseSession      = 4403 // Hello's user is not the one the credentials authenticate
	CloseIdle         = 4408 // nothing received within the idle deadline
	CloseProtocol     = 4426 // Hello's protocol is not spoken here
	CloseSlow         = 4429 // the client did not read fast enough
	CloseTooBig       = 1009
	CloseGoingAway    = 1001
)

// Codec errors. Use errors.Is.
var (
	ErrEmpty       = errors.New("realtime: empty message")
	ErrUnknownType = errors.New("realtime: unknown message type")
	ErrTooLarge    = errors.New("realtime: message too large")
	ErrTruncated   = errors.New("realtime: message truncated")
	ErrMalformed   = errors.New("realtime: message malformed")
)

// MaxUser bounds Hello's User.
const MaxUser = 1024

// MaxMessage is the default bound on an encoded message (1 MiB plus room
// for the fields around a payload of the receiver's default MaxBody).
const MaxMessage = 1<<20 + 4096
