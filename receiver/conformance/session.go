package conformance

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/wire"
)

// testSessionMismatch: a mutation whose X-Client-User is not the
// authenticated user is refused with 403 session-mismatch, stores nothing
// (not even under its key), and the same request from the right user runs.
func testSessionMismatch(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	r := e.do(req{user: "bob", key: "k1", body: okBody, hdr: map[string]string{wire.HeaderClientUser: "alice"}})
	want(t, r, 403)
	require.Equal(t, wire.ProblemSessionMismatch, r.problem(t).Type, "type")
	wantEffects(t, e, 0)
	// Not stored for bob's key either: the same key from bob, for bob,
	// runs.
	r = e.do(req{user: "bob", key: "k1", body: okBody, hdr: map[string]string{wire.HeaderClientUser: "bob"}})
	want(t, r, 201)
	require.False(t, r.replayed(), "the refusal was stored")
	// Alice's request, with alice's credentials, is hers.
	want(t, e.do(req{user: "alice", key: "k1", body: okBody, hdr: map[string]string{wire.HeaderClientUser: "alice"}}), 201)
	wantEffects(t, e, 2)
	// Users the header cannot carry as they are are compared formatted.
	u := "é ü"
	want(t, e.do(req{user: "x", key: "k2", body: okBody, hdr: map[string]string{wire.HeaderClientUser: wire.FormatClientUser(u)}}), 403)
	// Without the header nothing is checked (clients other than the outbox).
	want(t, e.do(req{user: "carol", key: "k3", body: okBody}), 201)
	wantEffects(t, e, 3)
}
