package realtime_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/wire"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

func samples() []rt.Message {
	stale := rt.Problem{Type: wire.ProblemStaleToken, Title: "Fencing token is stale", Status: 409, Highest: 7}
	return []rt.Message{
		rt.Hello{Protocol: rt.Protocol, Version: 41},
		rt.Hello{Protocol: rt.Protocol, Version: 41, User: "user-1"},
		rt.Ready{Version: 42},
		rt.Ready{Version: 42, Reset: true},
		rt.Delta{Version: 43, Prev: 42, Changes: []byte(`{"notes":[1]}`)},
		rt.Mutation{ID: "k-1", Op: "create", Entity: "note", Payload: []byte(`{"body":"hi"}`)},
		rt.Mutation{ID: "k-2", Op: "update", Entity: "note/7", Payload: []byte{}, Resource: "outbox:main", Token: 3},
		rt.Ack{ID: "k-1", Status: 201, Result: []byte(`{"id":9}`)},
		rt.Ack{ID: "k-1", Status: 201, Replayed: true, Result: []byte{}},
		rt.Reject{ID: "k-2", Problem: stale},
		rt.Reject{ID: "k-3", Problem: rt.Problem{Type: wire.ProblemInternal, Status: 500}, Retry: true},
		rt.Ping{Nonce: 1 << 40},
		rt.Pong{Nonce: 0},
		rt.Error{Problem: rt.Problem{Type: wire.ProblemUnauthenticated, Title: "Authentication required", Status: 401}},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range samples() {
		got, err := rt.Decode(rt.Encode(m), 0)
		require.NoError(t, err, "%#v", m)
		assert.Equal(t, m, got)
	}
}

func TestDecodeRefusesWithTypedErrors(t *testing.T) {
	mut := func(f func(*rt.Mutation)) []byte {
		m := rt.Mutation{ID: "k", Op: "create", Entity: "note"}
		f(&m)
		return rt.Encode(m)
	}
	cases := map[string]struct {
		b    []byte
		want error
	}{
		"empty":                {nil, rt.ErrEmpty},
		"unknown type":         {[]byte{0x7f, 1}, rt.ErrUnknownType},
		"type zero":            {[]byte{0}, rt.ErrUnknownType},
		"truncated":            {rt.Encode(rt.Hello{Protocol: 1, Version: 300})[:2], rt.ErrTruncated},
		"trailing":             {append(rt.Encode(rt.Ping{Nonce: 1}), 0), rt.ErrMalformed},
		"length past end":      {[]byte{byte(rt.TypeDelta), 2, 1, 0xff, 0x01}, rt.ErrTruncated},
		"varint past 64 bits":  {[]byte{byte(rt.TypePing), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, rt.ErrMalformed},
		"bool not 0/1":         {[]byte{byte(rt.TypeReady), 1, 2}, rt.ErrMalformed},
		"protocol 0":           {rt.Encode(rt.Hello{}), rt.ErrMalformed},
		"delta backwards":      {rt.Encode(rt.Delta{Version: 3, Prev: 3}), rt.ErrMalformed},
		"bad key":              {mut(func(m *rt.Mutation) { m.ID = `a"b` }), rt.ErrMalformed},
		"empty key":            {mut(func(m *rt.Mutation) { m.ID = "" }), rt.ErrMalformed},
		"bad op":               {mut(func(m *rt.Mutation) { m.Op = "a b" }), rt.ErrMalformed},
		"token alone":          {mut(func(m *rt.Mutation) { m.Token = 2 }), rt.ErrMalformed},
		"resource alone":       {mut(func(m *rt.Mutation) { m.Resource = "r" }), rt.ErrMalformed},
		"token past 2^53":      {mut(func(m *rt.Mutation) { m.Resource, m.Token = "r", wire.MaxToken+1 }), rt.ErrMalformed},
		"ack not 2xx":          {rt.Encode(rt.Ack{ID: "k", Status: 409}), rt.ErrMalformed},
		"reject not a problem": {rt.Encode(rt.Reject{ID: "k", Problem: rt.Problem{Status: 409}}), rt.ErrMalformed},
	}
	for name, c := range cases {
		_, err := rt.Decode(c.b, 0)
		assert.ErrorIs(t, err, c.want, name)
	}
	big := rt.Encode(rt.Delta{Version: 2, Prev: 1, Changes: bytes.Repeat([]byte("x"), 100)})
	_, err := rt.Decode(big, 64)
	assert.ErrorIs(t, err, rt.ErrTooLarge)
}

// FuzzDecode: any input decodes or fails with a typed error, never panics,
// and what decodes re-encodes to the same bytes (one encoding per message).
func FuzzDecode(f *testing.F) {
	for _, m := range samples() {
		f.Add(rt.Encode(m))
	}
	f.Add([]byte{byte(rt.TypeMutation), 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := rt.Decode(b, 4096)
		if err != nil {
			for _, e := range []error{rt.ErrEmpty, rt.ErrUnknownType, rt.ErrTooLarge, rt.ErrTruncated, rt.ErrMalformed} {
				if err == e {
					return
				}
			}
			t.Fatalf("untyped error %v", err)
		}
		if again := rt.Encode(m); !bytes.Equal(again, b) {
			// Varints have one canonical form on encode; a non-minimal
			// varint decodes but re-encodes shorter. That is the only
			// difference allowed.
			m2, err := rt.Decode(again, 4096)
			if err != nil || !equalMsg(m, m2) {
				t.Fatalf("re-encoding changed the message: %#v vs %#v (%v)", m, m2, err)
			}
		}
	})
}

func equalMsg(a, b rt.Message) bool { return bytes.Equal(rt.Encode(a), rt.Encode(b)) }
