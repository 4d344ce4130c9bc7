package receiver

import (
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/wire"
)

func TestParseHeaders(t *testing.T) {
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	for _, c := range []struct {
		h   http.Header
		err error
	}{
		{h(), wire.ErrKeyMissing},
		{h("Idempotency-Key", "k"), nil},
		{h("Idempotency-Key", "k", "Idempotency-Key", "k"), wire.ErrKeyMalformed},
		{h("Idempotency-Key", "k", "X-Client-Resource", "r"), ErrFencePartial},
		{h("Idempotency-Key", "k", "X-Client-Fencing-Token", "1"), ErrFencePartial},
		{h("Idempotency-Key", "k", "X-Client-Resource", "r", "X-Client-Fencing-Token", "0"), wire.ErrTokenMalformed},
		{h("Idempotency-Key", "k", "X-Client-Resource", "r r", "X-Client-Fencing-Token", "1"), wire.ErrResourceMalformed},
		{h("Idempotency-Key", "k", "X-Client-Resource", "r", "X-Client-Fencing-Token", "1", "X-Client-Fencing-Token", "2"), wire.ErrTokenMalformed},
		{h("Idempotency-Key", "k", "X-Client-Resource", "r", "X-Client-Fencing-Token", "1"), nil},
	} {
		_, err := parseHeaders(c.h)
		if !errors.Is(err, c.err) || (err == nil) != (c.err == nil) {
			t.Errorf("%v: err %v, want %v", c.h, err, c.err)
		}
		if err != nil {
			p := headerProblem(err)
			assert.Equal(t, 400, p.Status, "%v: problem status %d", c.h, p.Status)
		}
	}
}

func TestFingerprintBindsEveryPart(t *testing.T) {
	base := fingerprint("POST", "/a", "u", []byte("b"))
	for _, other := range []string{
		fingerprint("PUT", "/a", "u", []byte("b")),
		fingerprint("POST", "/b", "u", []byte("b")),
		fingerprint("POST", "/a", "v", []byte("b")),
		fingerprint("POST", "/a", "u", []byte("c")),
		fingerprint("POST", "/au", "", []byte("b")),
	} {
		require.NotEqual(t, base, other, "fingerprint collision")
	}
}

// FuzzParseHeaders: hostile header values never panic, and whatever is
// accepted is valid by the wire rules.
func FuzzParseHeaders(f *testing.F) {
	f.Add("k", "doc:1", "1", "op", true)
	f.Add(`"k"`, "", "", "", false)
	f.Add("", "r", "9007199254740992", "", true)
	f.Add("\x00", "a b", "-1", "\xff", true)
	f.Fuzz(func(t *testing.T, key, res, tok, op string, fenced bool) {
		h := http.Header{}
		h.Set(wire.HeaderIdempotencyKey, key)
		h.Set(wire.HeaderOperationID, op)
		if fenced {
			h.Set(wire.HeaderResource, res)
			h.Set(wire.HeaderFencingToken, tok)
		}
		out, err := parseHeaders(h)
		if err != nil {
			p := headerProblem(err)
			require.Equal(t, 400, p.Status, "bad problem for %v", err)
			require.NotEqual(t, "", p.Type, "bad problem for %v", err)
			return
		}
		require.True(t, wire.ValidKey(out.key), "accepted key %q", out.key)
		if out.resource != "" && (!wire.ValidResource(out.resource) || out.token < 1 || out.token > wire.MaxToken) {
			t.Fatalf("accepted fence %q %d", out.resource, out.token)
		}
		if out.opID != "" && !wire.ValidKey(out.opID) {
			t.Fatalf("accepted op id %q", out.opID)
		}
	})
}
