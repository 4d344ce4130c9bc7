package realtime

import "github.com/tabfence/tabfence/wire"

// The encoding: one type byte, then the message's fields in declaration
// order. Numbers are unsigned varints (LEB128, at most 10 bytes); strings
// and byte fields are a varint length and the bytes; a bool is one byte, 0
// or 1. Nothing may follow the last field. Binary rather than JSON because
// the runtime links no encoding/json, and because payloads (the
// application's JSON) then travel as they are, without a second escaping.

// Encode renders m; it does not validate (Decode does, on the other side).
func Encode(m Message) []byte { return Append(nil, m) }

// Append appends m's encoding to b.
func Append(b []byte, m Message) []byte {
	b = append(b, byte(m.Type()))
	switch v := m.(type) {
	case Hello:
		b = putString(putUint(putUint(b, v.Protocol), v.Version), v.User)
	case Ready:
		b = putBool(putUint(b, v.Version), v.Reset)
	case Delta:
		b = putBytes(putUint(putUint(b, v.Version), v.Prev), v.Changes)
	case Mutation:
		b = putString(putString(putString(b, v.ID), v.Op), v.Entity)
		b = putUint(putString(putBytes(b, v.Payload), v.Resource), v.Token)
	case Ack:
		b = putBytes(putBool(putUint(putString(b, v.ID), v.Status), v.Replayed), v.Result)
	case Reject:
		b = putBool(putProblem(putString(b, v.ID), v.Problem), v.Retry)
	case Ping:
		b = putUint(b, v.Nonce)
	case Pong:
		b = putUint(b, v.Nonce)
	case Error:
		b = putProblem(b, v.Problem)
	}
	return b
}

// Decode parses one message of at most max bytes (MaxMessage when max <= 0)
// and validates it: identifiers have the wire's syntax, a fencing token
// comes with its resource, a delta moves forward. It never panics; every
// error wraps one of the Err* values. Byte fields alias b.
func Decode(b []byte, max int) (Message, error) {
	if max <= 0 {
		max = MaxMessage
	}
	if len(b) > max {
		return nil, ErrTooLarge
	}
	if len(b) == 0 {
		return nil, ErrEmpty
	}
	r := reader{b: b[1:]}
	m, err := decodeBody(Type(b[0]), &r)
	if err != nil {
		return nil, err
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, ErrMalformed
	}
	if !valid(m) {
		return nil, ErrMalformed
	}
	return m, nil
}

func decodeBody(t Type, r *reader) (Message, error) {
	switch t {
	case TypeHello:
		return Hello{Protocol: r.uint(), Version: r.uint(), User: r.string()}, nil
	case TypeReady:
		return Ready{Version: r.uint(), Reset: r.bool()}, nil
	case TypeDelta:
		return Delta{Version: r.uint(), Prev: r.uint(), Changes: r.bytes()}, nil
	case TypeMutation:
		return Mutation{ID: r.string(), Op: r.string(), Entity: r.string(), Payload: r.bytes(),
			Resource: r.string(), Token: r.uint()}, nil
	case TypeAck:
		return Ack{ID: r.string(), Status: r.uint(), Replayed: r.bool(), Result: r.bytes()}, nil
	case TypeReject:
		return Reject{ID: r.string(), Problem: r.problem(), Retry: r.bool()}, nil
	case TypePing:
		return Ping{Nonce: r.uint()}, nil
	case TypePong:
		return Pong{Nonce: r.uint()}, nil
	case TypeError:
		return Error{Problem: r.problem()}, nil
	}
	return nil, ErrUnknownType
}

// valid checks the rules beyond the layout.
func valid(m Message) bool {
	switch v := m.(type) {
	case Hello:
		return v.Protocol >= 1 && v.Version <= wire.MaxToken && len(v.User) <= MaxUser
	case Ready:
		return v.Version <= wire.MaxToken
	case Delta:
		return v.Version > v.Prev && v.Version <= wire.MaxToken
	case Mutation:
		if !wire.ValidKey(v.ID) || !wire.ValidResource(v.Op) || !wire.ValidResource(v.Entity) {
			return false
		}
		if v.Resource == "" {
			return v.Token == 0
		}
		return wire.ValidResource(v.Resource) && v.Token >= 1 && v.Token <= wire.MaxToken
	case Ack:
		return wire.ValidKey(v.ID) && v.Status >= 200 && v.Status < 300
	case Reject:
		return wire.ValidKey(v.ID) && validProblem(v.Problem)
	case Error:
		return validProblem(v.Problem)
	}
	return true
}

func validProblem(p Problem) bool { return p.Type != "" && p.Status >= 400 && p.Status <= 599 }

// The put functions, reader.string and reader.bool are not inlined: the
// encoder and decoder call them at dozens of sites, and a copy of a loop
// and an append at each made Append and decodeBody several times larger
// in wasm.
//
//go:noinline
func putUint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

//go:noinline
func putBytes(b, v []byte) []byte { return append(putUint(b, uint64(len(v))), v...) }

//go:noinline
func putString(b []byte, v string) []byte { return append(putUint(b, uint64(len(v))), v...) }

func putBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func putProblem(b []byte, p Problem) []byte {
	b = putString(putString(putString(b, p.Type), p.Title), p.Detail)
	return putUint(putUint(b, p.Status), p.Highest)
}

// reader consumes fields; the first error sticks and later reads return
// zero values, so a decoder checks once at the end.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.b = nil
}

func (r *reader) uint() uint64 {
	var v uint64
	for i := 0; i < 10; i++ {
		if len(r.b) == 0 {
			r.fail(ErrTruncated)
			return 0
		}
		c := r.b[0]
		r.b = r.b[1:]
		if i == 9 && c > 1 {
			r.fail(ErrMalformed) // past 64 bits
			return 0
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v
		}
	}
	r.fail(ErrMalformed)
	return 0
}

func (r *reader) bytes() []byte {
	n := r.uint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(ErrTruncated)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

//go:noinline
func (r *reader) string() string { return string(r.bytes()) }

//go:noinline
func (r *reader) bool() bool {
	if len(r.b) == 0 {
		r.fail(ErrTruncated)
		return false
	}
	c := r.b[0]
	r.b = r.b[1:]
	if c > 1 {
		r.fail(ErrMalformed)
	}
	return c == 1
}

func (r *reader) problem() Problem {
	return Problem{Type: r.string(), Title: r.string(), Detail: r.string(), Status: r.uint(), Highest: r.uint()}
}
