// Package channel carries fenced messages between the tabs of one browser
// over a BroadcastChannel. Every message says which leadership epoch (token)
// and which position in that leader's stream (sequence) it belongs to, so a
// receiver can drop what a stale leader says, drop replays, and notice a gap
// — and reload from storage rather than guess.
//
// Anything on the channel is untrusted: any same-origin script can post
// anything. Decoding checks every field's type and bounds; malformed,
// oversized, foreign and other-version messages are dropped and counted,
// never a panic.
//
// The rules (cursor, guard, sequencer, validation) are pure Go and tested
// natively; the BroadcastChannel plumbing lives in *_js.go files.
package channel

import (
	"strconv"
	"sync"
	"time"

	"github.com/tabfence/tabfence/internal/randid"
)

// Protocol and Version identify tabfence envelopes. A message of another
// protocol or version is dropped: two builds must not coordinate one
// resource with different rules (the channel name carries the version too).
const (
	Protocol = "tabfence"
	Version  = 1
)

// MaxToken bounds tokens and sequences: both travel as JavaScript numbers.
const MaxToken = 1<<53 - 1

// Envelope is one fenced message.
type Envelope struct {
	Protocol string // always "tabfence"
	Version  int    // protocol version, Version
	ID       string // random message ID, for deduplication
	Kind     string // application message type, e.g. "delta"
	Resource string // the fenced resource the sender leads
	Owner    string // the sender's owner (contender) ID
	Token    uint64 // the sender's fencing token, 1..MaxToken
	Seq      uint64 // position in the sender's stream under Token, 1, 2, 3…
	SentAt   int64  // ms since the Unix epoch; metadata, never an authority
	// Payload is the application data, structured-cloneable. In the browser
	// it is a js.Value kept as is; native code treats it as opaque.
	Payload Payload
}

// Limits bound what a received (or sent) envelope may carry. Zero fields
// take the defaults of DefaultLimits.
type Limits struct {
	MaxID, MaxKind, MaxResource, MaxOwner int // string lengths (UTF-16 units)
	// MaxPayload bounds the payload where it is measurable without walking
	// it: a string's length, an ArrayBuffer's or typed array's byteLength, a
	// Blob's size. Object payloads are not measured.
	MaxPayload int
	// MaxResources bounds how many resources a channel keeps cursors for;
	// messages naming more are dropped as oversized, so a hostile script
	// cannot grow memory (nor evict a real resource's cursor).
	MaxResources int
	// RecentIDs is how many message IDs a cursor remembers per resource.
	RecentIDs int
	// MaxBuffered bounds messages held in Buffer mode; past it the oldest
	// are dropped and Replay reports a gap.
	MaxBuffered int
}

// DefaultLimits are used for zero fields of Limits.
var DefaultLimits = Limits{
	MaxID: 128, MaxKind: 64, MaxResource: 200, MaxOwner: 128,
	MaxPayload: 1 << 20, MaxResources: 256, RecentIDs: 256, MaxBuffered: 4096,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	pick := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	return Limits{
		MaxID: pick(l.MaxID, d.MaxID), MaxKind: pick(l.MaxKind, d.MaxKind),
		MaxResource: pick(l.MaxResource, d.MaxResource), MaxOwner: pick(l.MaxOwner, d.MaxOwner),
		MaxPayload: pick(l.MaxPayload, d.MaxPayload), MaxResources: pick(l.MaxResources, d.MaxResources),
		RecentIDs: pick(l.RecentIDs, d.RecentIDs), MaxBuffered: pick(l.MaxBuffered, d.MaxBuffered),
	}
}

// Reason is why a message was dropped.
type Reason int

const (
	ReasonNone      Reason = iota
	StaleToken             // token below the highest seen for the resource
	DuplicateSeq           // sequence already seen under the current token
	DuplicateID            // message ID already seen
	Malformed              // not an object, wrong types, out-of-range numbers
	WrongVersion           // tabfence, but another protocol version
	Oversized              // a field, the payload or the resource count over Limits
	ForeignProtocol        // not a tabfence envelope
	numReasons
)

var reasonNames = [numReasons]string{"none", "stale_token", "duplicate_seq", "duplicate_id",
	"malformed", "version", "oversized", "foreign_protocol"}

func (r Reason) String() string {
	if r < 0 || r >= numReasons {
		return "unknown"
	}
	return reasonNames[r]
}

// Reasons lists every drop reason.
func Reasons() []Reason {
	out := make([]Reason, 0, numReasons-1)
	for r := StaleToken; r < numReasons; r++ {
		out = append(out, r)
	}
	return out
}

// Check validates the fields of e that decoding could not (emptiness,
// bounds, protocol, version) and returns why it must be dropped, or
// ReasonNone. Protocol and version are checked first: a message from
// another protocol or build is not "malformed", it is someone else's.
func (l Limits) Check(e Envelope) Reason {
	l = l.withDefaults()
	switch {
	case e.Protocol != Protocol:
		return ForeignProtocol
	case e.Version != Version:
		return WrongVersion
	case len(e.ID) > 3*l.MaxID || len(e.Kind) > 3*l.MaxKind ||
		len(e.Resource) > 3*l.MaxResource || len(e.Owner) > 3*l.MaxOwner:
		// Go strings are UTF-8: up to 3 bytes per UTF-16 unit. The browser
		// side checks the exact length before copying.
		return Oversized
	case e.ID == "" || e.Kind == "" || e.Resource == "" || e.Owner == "":
		return Malformed
	case e.Token == 0 || e.Token > MaxToken || e.Seq == 0 || e.Seq > MaxToken:
		return Malformed
	case e.SentAt < 0 || e.SentAt > MaxToken:
		return Malformed
	}
	return ReasonNone
}

// Stats is a snapshot of a channel's counters.
type Stats struct {
	Received  uint64 // messages that reached the channel
	Delivered uint64 // messages handed to subscribers
	Gaps      uint64 // deliveries flagged as following a gap
	Dropped   [numReasons]uint64
}

// DroppedBy returns the drops counted for r.
func (s Stats) DroppedBy(r Reason) uint64 {
	if r <= ReasonNone || r >= numReasons {
		return 0
	}
	return s.Dropped[r]
}

// TotalDropped sums every drop reason.
func (s Stats) TotalDropped() uint64 {
	var n uint64
	for _, c := range s.Dropped {
		n += c
	}
	return n
}

// Sequencer stamps the envelopes of one leader context (resource, owner,
// token) with sequences 1, 2, 3… and random IDs. Make a new one for every
// new token: sequences restart per epoch, which is what receivers expect.
type Sequencer struct {
	mu       sync.Mutex
	resource string
	owner    string
	token    uint64
	seq      uint64
}

// NewSequencer returns the sequencer of one leader context.
func NewSequencer(resource, owner string, token uint64) *Sequencer {
	return &Sequencer{resource: resource, owner: owner, token: token}
}

// Token returns the sequencer's fencing token.
func (s *Sequencer) Token() uint64 { return s.token }

// Next returns the next envelope of kind carrying payload.
func (s *Sequencer) Next(kind string, payload Payload) Envelope {
	s.mu.Lock()
	s.seq++
	seq := s.seq
	s.mu.Unlock()
	return Envelope{
		Protocol: Protocol, Version: Version, ID: NewID(), Kind: kind,
		Resource: s.resource, Owner: s.owner, Token: s.token, Seq: seq,
		SentAt: time.Now().UnixMilli(), Payload: payload,
	}
}

// NewID returns a random 128-bit message ID, hex. IDs only identify; they
// never order (a UUID cannot fence). The bytes come from the platform's
// CSPRNG: crypto/rand natively, and in the browser crypto.getRandomValues
// directly (see internal/randid).
//
// The bytes are drawn from the CSPRNG 32 IDs at a time: in the browser each
// draw is several calls into JavaScript (a Uint8Array, getRandomValues, a
// copy), which a post would otherwise pay for 16 bytes.
func NewID() string {
	idPool.mu.Lock()
	defer idPool.mu.Unlock()
	if idPool.n == 0 {
		randid.Read(idPool.buf[:])
		idPool.n = len(idPool.buf)
	}
	b := idPool.buf[idPool.n-16 : idPool.n]
	idPool.n -= 16
	id := randid.Hex(b)
	clear(b) // a drawn ID's bytes do not linger
	return id
}

var idPool struct {
	mu  sync.Mutex
	buf [32 * 16]byte
	n   int
}

// Verdict is what a cursor decides about one message.
type Verdict struct {
	Accept bool
	Reason Reason // why it was dropped, when !Accept
	// Gap: accepted, but messages were missed before it (the sequence
	// jumped within a token, or a new token started past 1). The app should
	// reload from storage rather than guess: "write, then announce" means
	// storage holds at least what was announced.
	Gap bool
}

// Cursor is a receiver's position in one resource's message stream.
type Cursor struct {
	token, seq uint64
	ids        idSet
}

// NewCursor returns an empty cursor remembering up to recentIDs message IDs
// (<= 0: DefaultLimits.RecentIDs).
func NewCursor(recentIDs int) *Cursor {
	if recentIDs <= 0 {
		recentIDs = DefaultLimits.RecentIDs
	}
	return &Cursor{ids: newIDSet(recentIDs)}
}

// Position returns the highest token seen and the highest sequence under it.
func (c *Cursor) Position() (token, seq uint64) { return c.token, c.seq }

// Seed sets the position the app loaded from storage, when it knows it.
func (c *Cursor) Seed(token, seq uint64) {
	if token > c.token || (token == c.token && seq > c.seq) {
		c.token, c.seq = token, seq
	}
}

// Offer applies the rules to one valid envelope (see Limits.Check):
//   - lower token than the highest seen -> drop (stale_token): an old
//     leader must not roll followers back;
//   - message ID already seen -> drop (duplicate_id);
//   - same token, sequence not past the highest -> drop (duplicate_seq);
//     same-token messages are NOT rejected as such: one leader sends many;
//   - higher token -> accept and restart the sequence from this message;
//   - accepted with a jump (seq > highest+1 within a token, or a new token
//     whose first seq > 1) -> Gap. A cursor that has seen nothing yet
//     reports no gap: the tab loaded from storage after subscribing, so its
//     state already covers what came before.
func (c *Cursor) Offer(token, seq uint64, id string) Verdict {
	if token < c.token {
		return Verdict{Reason: StaleToken}
	}
	if c.ids.has(id) {
		return Verdict{Reason: DuplicateID}
	}
	if token == c.token && seq <= c.seq {
		return Verdict{Reason: DuplicateSeq}
	}
	fresh := c.token == 0
	var gap bool
	if token > c.token {
		gap = !fresh && seq > 1
	} else {
		gap = seq > c.seq+1
	}
	c.token, c.seq = token, seq
	c.ids.add(id)
	return Verdict{Accept: true, Gap: gap}
}

// idSet remembers the last n IDs: a map for lookup, a ring for eviction.
type idSet struct {
	ring []string
	next int
	m    map[string]struct{}
}

func newIDSet(n int) idSet {
	return idSet{ring: make([]string, n), m: make(map[string]struct{}, n)}
}

func (s *idSet) has(id string) bool { _, ok := s.m[id]; return ok }

func (s *idSet) add(id string) {
	if old := s.ring[s.next]; old != "" {
		delete(s.m, old)
	}
	s.ring[s.next] = id
	s.m[id] = struct{}{}
	s.next = (s.next + 1) % len(s.ring)
}

// Guard is a local epoch guard for results that only touch memory or UI —
// a late fetch, a worker result, a progress event: before applying one,
// check that the token it was started under is still current. It does not
// replace the durable fence for real state (see package idb).
type Guard struct {
	mu      sync.Mutex
	current map[string]uint64
}

// NewGuard returns an empty guard.
func NewGuard() *Guard { return &Guard{current: map[string]uint64{}} }

// Advance records token for resource if it is higher than the current one;
// it never goes back.
func (g *Guard) Advance(resource string, token uint64) {
	g.mu.Lock()
	if token > g.current[resource] {
		g.current[resource] = token
	}
	g.mu.Unlock()
}

// Current returns the highest token recorded for resource (0 if none).
func (g *Guard) Current(resource string) uint64 {
	g.mu.Lock()
	t := g.current[resource]
	g.mu.Unlock()
	return t
}

// IsCurrent reports whether token is the resource's current token: the
// result may be applied.
func (g *Guard) IsCurrent(resource string, token uint64) bool {
	return token != 0 && g.Current(resource) == token
}

// IsStale reports whether a newer token has been recorded than token.
func (g *Guard) IsStale(resource string, token uint64) bool {
	return token < g.Current(resource)
}

// String renders a verdict for logs.
func (v Verdict) String() string {
	if !v.Accept {
		return "drop:" + v.Reason.String()
	}
	return "accept gap=" + strconv.FormatBool(v.Gap)
}

// String renders an envelope's header for logs.
func (e Envelope) String() string {
	return e.Kind + " " + e.Resource + " token=" + strconv.FormatUint(e.Token, 10) + " seq=" + strconv.FormatUint(e.Seq, 10)
}
