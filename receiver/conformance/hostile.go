package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/wire"
)

// hostileCases are what clients that are hostile or unlucky must not break:
// none of them may turn client input into a 5xx or store it differently on
// another store.
var hostileCases = []struct {
	name string
	fn   func(*testing.T, NewDB)
}{
	{"EmptyKeyHeaderIsMalformed", testEmptyKeyHeader},
	{"ProblemsCarryDetail", testProblemDetails},
	{"TextWithNULRejectedAlike", testTextNUL},
	{"TextStoredFaithfully", testTextFaithful},
	{"OrphanedClaimRetryAfter", testOrphanRetryAfter},
	{"CommitOutcomeUnknown", testCommitUnknown},
}

func testEmptyKeyHeader(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	for _, v := range []string{"", " ", `""`} {
		r := e.do(req{user: "alice", body: okBody, hdr: map[string]string{wire.HeaderIdempotencyKey: v}})
		want(t, r, 400)
		p := r.problem(t)
		require.Equal(t, wire.ProblemMalformedKey, p.Type, "Idempotency-Key: %q: type %q, want malformed", v, p.Type)
	}
	wantEffects(t, e, 0)
}

func testProblemDetails(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	for _, q := range []req{
		{key: "k1", body: okBody}, // unauthenticated
		{user: "alice", body: okBody},
		{user: "alice", key: "a b", body: okBody},
		{user: "alice", key: "k1", resource: "doc:1", body: okBody},
		{user: "alice", key: "k1", body: strings.Repeat("x", 5000)},
	} {
		r := e.do(q)
		p := r.problem(t)
		assert.NotEqual(t, "", p.Detail, "%d %s has no detail", r.status, p.Type)
	}
}

// testTextNUL: PostgreSQL's TEXT cannot hold a NUL, SQLite's can. Both
// stores refuse it before the statement, so the answer is the same 422 on
// both, stored like any 4xx (a retrying outbox gets it replayed and stops),
// and the handler's writes are rolled back.
func testTextNUL(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	body := `{"mode":"text","data":"a\u0000b"}`
	r := e.do(req{user: "alice", key: "nul", body: body})
	want(t, r, 422)
	p := r.problem(t)
	require.Equal(t, wire.ProblemInvalidText, p.Type, "type %q, want invalid-text", p.Type)
	wantEffects(t, e, 0)
	r = e.do(req{user: "alice", key: "nul", body: body})
	want(t, r, 422)
	require.True(t, r.replayed(), "the 422 was not stored: an outbox would send the record again")
	// Directly, through both kinds of handle, the error is typed.
	ctx := context.Background()
	err := e.store.View(ctx, func(q receiver.Tx) error {
		var n int64
		return q.QueryRow(ctx, `SELECT COUNT(*) FROM conf_text WHERE body = $1`, "x\x00").Scan(&n)
	})
	require.ErrorIs(t, err, receiver.ErrInvalidText, "View with a NUL argument: %v, want ErrInvalidText", err)
	tx, err := e.store.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.Exec(ctx, `INSERT INTO conf_text (idem_key, body) VALUES ($1, $2)`, "k", "bad \xff")
	require.ErrorIs(t, err, receiver.ErrInvalidText, "Exec with invalid UTF-8: %v, want ErrInvalidText", err)
}

// testTextFaithful: any other text comes back byte for byte.
func testTextFaithful(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	const text = "é 日本 🎉 \u2028 \t\\\"' \U0010FFFF \uFFFD"
	data, _ := json.Marshal(text)
	want(t, e.do(req{user: "alice", key: "t1", body: `{"mode":"text","data":` + string(data) + `}`}), 201)
	ctx := context.Background()
	var got string
	err := e.store.View(ctx, func(q receiver.Tx) error {
		return q.QueryRow(ctx, `SELECT body FROM conf_text WHERE idem_key = $1`, "t1").Scan(&got)
	})
	require.NoError(t, err, "stored %q (%v)", got, err)
	require.Equal(t, text, got, "stored %q (%v)", got, err)
}

// testOrphanRetryAfter leaves a claim behind as a crashed process would. A
// client obeying Retry-After must not poll it every second for ClaimTTL: the
// wait follows the claim's age, up to its remaining time, and the retry at
// expiry takes the claim over.
func testOrphanRetryAfter(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, func(e *env) { e.opts.ClaimTTL = time.Minute })
	ctx := context.Background()
	orphan := func(key string, age time.Duration) {
		now := e.clock.now()
		tx, err := e.store.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO tabfence_idempotency
			(scope, idem_key, fingerprint, state, claim, claim_expires, status, header, body, created, expires)
			VALUES ($1, $2, $3, 1, 'dead', $4, 0, '', $5, $6, $7)`,
			"alice", key, receiver.Fingerprint("POST", "/things", "alice", []byte(okBody)),
			now.Add(time.Minute-age).UnixMilli(), []byte{}, now.Add(-age).UnixMilli(), now.Add(time.Hour).UnixMilli())
		if err == nil {
			err = tx.Commit()
		}
		require.NoError(t, err)
	}
	for _, c := range []struct {
		age  time.Duration
		want string
	}{{0, "1"}, {10 * time.Second, "10"}, {40 * time.Second, "20"}, {59500 * time.Millisecond, "1"}} {
		key := "aged" + c.age.String()
		orphan(key, c.age)
		r := e.do(req{user: "alice", key: key, body: okBody})
		want(t, r, 409)
		got := r.header.Get(wire.HeaderRetryAfter)
		require.Equal(t, c.want, got, "claim aged %s: Retry-After %q", c.age, got)
	}
	// A client that obeys Retry-After from the moment of the crash.
	orphan("k1", 0)
	polls, waited := 0, time.Duration(0)
	for {
		r := e.do(req{user: "alice", key: "k1", body: okBody})
		if r.status == 201 {
			break
		}
		want(t, r, 409)
		polls++
		d, ok := wire.ParseRetryAfter(r.header.Get(wire.HeaderRetryAfter), time.Now())
		require.True(t, ok, "poll %d: Retry-After %q", polls, r.header.Get(wire.HeaderRetryAfter))
		require.LessOrEqual(t, polls, 20, "poll %d: Retry-After %q", polls, r.header.Get(wire.HeaderRetryAfter))
		e.clock.advance(d)
		waited += d
	}
	t.Logf("taken over after %d polls and %s", polls, waited)
	require.LessOrEqual(t, polls, 8, "%d polls over %s for an orphaned claim of ClaimTTL 1m; want at most 8, within ClaimTTL", polls, waited)
	require.LessOrEqual(t, waited, time.Minute+time.Second, "%d polls over %s for an orphaned claim of ClaimTTL 1m; want at most 8, within ClaimTTL", polls, waited)
}

// testCommitUnknown: the connection is lost around COMMIT, after the
// database committed. The 500 must not claim nothing was stored, and the
// retry gets the stored answer, not a second effect.
func testCommitUnknown(t *testing.T, newDB NewDB) {
	var lose atomic.Bool
	e := newEnv(t, newDB, func(e *env) {
		e.wrap = func(st receiver.Store) receiver.Store { return &lossyStore{Store: st, lose: &lose} }
	})
	lose.Store(true)
	r := e.do(req{user: "alice", key: "k1", body: okBody})
	want(t, r, 500)
	p := r.problem(t)
	require.Equal(t, wire.ProblemInternal, p.Type, "detail %q: must say the request may have been stored", p.Detail)
	require.NotContains(t, p.Detail, "Nothing was stored", "detail %q: must say the request may have been stored", p.Detail)
	require.Contains(t, p.Detail, "may", "detail %q: must say the request may have been stored", p.Detail)
	wantEffects(t, e, 1)
	r = e.do(req{user: "alice", key: "k1", body: okBody})
	want(t, r, 201)
	require.True(t, r.replayed(), "retry after a lost commit acknowledgement ran again")
	wantEffects(t, e, 1)
}

// lossyStore commits the business transaction, then reports the connection
// lost, once.
type lossyStore struct {
	receiver.Store
	lose *atomic.Bool
}

func (s *lossyStore) Begin(ctx context.Context) (receiver.WriteTx, error) {
	tx, err := s.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &lossyTx{WriteTx: tx, lose: s.lose}, nil
}

type lossyTx struct {
	receiver.WriteTx
	lose     *atomic.Bool
	business bool
}

func (t *lossyTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if strings.Contains(query, "conf_effects") {
		t.business = true
	}
	return t.WriteTx.Exec(ctx, query, args...)
}

func (t *lossyTx) Commit() error {
	err := t.WriteTx.Commit()
	if err == nil && t.business && t.lose.CompareAndSwap(true, false) {
		return errors.New("conn lost around COMMIT")
	}
	return err
}
