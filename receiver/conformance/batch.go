package conformance

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/wire"
)

// batchCases are the batch contract (rc.HandleBatch): many mutations in one
// request, each with its own key, each still taking effect once.
var batchCases = []struct {
	name string
	fn   func(*testing.T, NewDB)
}{
	{"BatchReplayedNewAndRejected", testBatchMixed},
	{"BatchKeyReuseRejectsThatMutationOnly", testBatchKeyReuse},
	{"BatchFailedMutationStopsItsEntityOnly", testBatchEntityStop},
	{"BatchServerErrorLeavesNothing", testBatchServerError},
	{"BatchFailedStatementRolledBackToSavepoint", testBatchFailedStatement},
	{"BatchUnparsedStatementRollsBackItsOwnMutation", testBatchUnparsed},
	{"BatchStaleTokenRefusedWhole", testBatchStale},
	{"BatchStaleTokenRaceRejectedInTransaction", testBatchStaleRace},
	{"BatchCrashMidBatchLeavesNothing", testBatchCrash},
	{"BatchClientGoneMidBatch", testBatchClientGone},
	{"BatchHundredConcurrentCopies", testBatchConcurrent},
	{"BatchRacingSingleRequests", testBatchVsSingle},
	{"BatchTwoInstancesOneDatabase", testBatchTwoInstances},
}

const rejectBody = `{"mode":"reject"}`

// testBatchMixed: a mutation finished before is replayed, a new one runs,
// a rejected one (4xx) is stored and rolls back nothing but its own writes;
// the whole batch sent again is replayed mutation by mutation.
func testBatchMixed(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	first := e.wantBatch(breq{user: "alice", muts: []wire.BatchMutation{mut("k1", "a", okBody)}})
	wantOutcome(t, first[0], "k1", wire.BatchApplied, 201)
	muts := []wire.BatchMutation{mut("k1", "a", okBody), mut("k2", "b", okBody), mut("k3", "c", rejectBody), mut("k4", "d", okBody)}
	rs := e.wantBatch(breq{user: "alice", muts: muts})
	require.Len(t, rs, 4)
	wantOutcome(t, rs[0], "k1", wire.BatchReplayed, 201)
	require.JSONEq(t, string(first[0].Body), string(rs[0].Body), "replayed body")
	wantOutcome(t, rs[1], "k2", wire.BatchApplied, 201)
	require.Contains(t, string(rs[1].Body), `"k2"`, "applied body is the handler's answer")
	wantOutcome(t, rs[2], "k3", wire.BatchRejected, 422)
	require.Contains(t, string(rs[2].Body), wire.ProblemBase+"invalid", "rejected body is the handler's problem")
	wantOutcome(t, rs[3], "k4", wire.BatchApplied, 201)
	require.Equal(t, 1, e.effectsOf("k1"), "k1 ran again")
	require.Equal(t, 0, e.effectsOf("k3"), "the rejected mutation's write was not rolled back")
	wantEffects(t, e, 3)
	// The same batch again: nothing runs, every answer is the stored one.
	again := e.wantBatch(breq{user: "alice", muts: muts})
	for i, r := range again {
		require.Equal(t, rs[i].Status, r.Status, "%s: status on resend", r.Key)
		require.JSONEq(t, string(rs[i].Body), string(r.Body), "%s: body on resend", r.Key)
		require.NotEqual(t, wire.BatchApplied, r.Outcome, "%s ran again on resend", r.Key)
	}
	require.Equal(t, wire.BatchReplayed, again[1].Outcome, "k2 on resend")
	wantEffects(t, e, 3)
	// A batch key is a key: the same key in a single request replays or is
	// refused as reused, never runs again.
	r := e.do(req{user: "alice", key: "k2", body: okBody})
	require.Contains(t, []int{201, 422}, r.status, "single request with a batch's key: %d %s", r.status, r.body)
	require.True(t, r.status == 422 || r.replayed(), "single request with a batch's key ran: %d %s", r.status, r.body)
	wantEffects(t, e, 3)
}

// testBatchKeyReuse: a key finished with one payload and sent in a batch
// with another is that mutation's 422, stored nowhere; the rest of the
// batch goes on.
func testBatchKeyReuse(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	wantOutcome(t, e.wantBatch(breq{user: "alice", muts: []wire.BatchMutation{mut("k1", "a", okBody)}})[0], "k1", wire.BatchApplied, 201)
	rs := e.wantBatch(breq{user: "alice", muts: []wire.BatchMutation{
		mut("k1", "a", `{"mode":"ok","data":"other"}`), mut("k2", "b", okBody),
	}})
	wantOutcome(t, rs[0], "k1", wire.BatchRejected, 422)
	require.Equal(t, wire.ProblemKeyReuse, rs[0].Problem, "problem of a reused key")
	wantOutcome(t, rs[1], "k2", wire.BatchApplied, 201)
	wantEffects(t, e, 2)
	// The stored answer of k1 is untouched.
	rs = e.wantBatch(breq{user: "alice", muts: []wire.BatchMutation{mut("k1", "a", okBody)}})
	wantOutcome(t, rs[0], "k1", wire.BatchReplayed, 201)
	require.Contains(t, string(rs[0].Body), `"x"`, "k1's stored answer changed")
	// Another user's key of the same name is another key.
	wantOutcome(t, e.wantBatch(breq{user: "bob", muts: []wire.BatchMutation{mut("k1", "a", okBody)}})[0], "k1", wire.BatchApplied, 201)
	wantEffects(t, e, 3)
}

// testBatchEntityStop: after a mutation of an entity fails (rejected or
// retry), the later mutations of that entity are not attempted (nothing
// run, nothing stored), while other entities' mutations are applied.
func testBatchEntityStop(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	muts := []wire.BatchMutation{
		mut("a1", "A", okBody), mut("a2", "A", rejectBody), mut("a3", "A", okBody),
		mut("b1", "B", okBody), mut("a4", "A", okBody),
		mut("c1", "C", `{"mode":"flaky500"}`), mut("c2", "C", okBody), mut("b2", "B", okBody),
	}
	rs := e.wantBatch(breq{user: "alice", muts: muts})
	require.Len(t, rs, len(muts))
	wantOutcome(t, rs[0], "a1", wire.BatchApplied, 201)
	wantOutcome(t, rs[1], "a2", wire.BatchRejected, 422)
	wantOutcome(t, rs[2], "a3", wire.BatchNotAttempted, 0)
	wantOutcome(t, rs[3], "b1", wire.BatchApplied, 201)
	wantOutcome(t, rs[4], "a4", wire.BatchNotAttempted, 0)
	require.Equal(t, wire.BatchRetry, rs[5].Outcome, "c1: %+v", rs[5])
	require.Equal(t, 503, rs[5].Status, "c1: the status it would have had alone")
	wantOutcome(t, rs[6], "c2", wire.BatchNotAttempted, 0)
	wantOutcome(t, rs[7], "b2", wire.BatchApplied, 201)
	e.mu.Lock()
	for _, k := range []string{"a3", "a4", "c2"} {
		assert.Equal(t, 0, e.attempts["alice\x00"+k], "%s: not attempted, yet the handler ran", k)
	}
	e.mu.Unlock()
	wantEffects(t, e, 3)
	// Nothing was stored for the mutations not attempted nor for the retry:
	// the client's next batch runs them.
	rs = e.wantBatch(breq{user: "alice", muts: []wire.BatchMutation{
		mut("c1", "C", `{"mode":"flaky500"}`), mut("c2", "C", okBody), mut("a3", "A2", okBody),
	}})
	wantOutcome(t, rs[0], "c1", wire.BatchApplied, 201)
	wantOutcome(t, rs[1], "c2", wire.BatchApplied, 201)
	wantOutcome(t, rs[2], "a3", wire.BatchApplied, 201)
	wantEffects(t, e, 6)
}

// testBatchServerError: a mutation's 5xx, error or panic rolls back its own
// writes, stores nothing under its key, leaks no error text, and keeps the
// other entities' mutations.
func testBatchServerError(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	muts := []wire.BatchMutation{
		mut("ok1", "A", okBody), mut("s500", "B", `{"mode":"flaky500"}`), mut("serr", "C", `{"mode":"flakyerr"}`),
		mut("spanic", "D", `{"mode":"flakypanic"}`), mut("ok2", "E", okBody),
	}
	r, rs := e.batch(breq{user: "alice", muts: muts})
	want(t, r, 200)
	require.NotContains(t, string(r.body), "fire", "error text leaked: %s", r.body)
	require.NotContains(t, string(r.body), "handler bug", "panic text leaked: %s", r.body)
	wantOutcome(t, rs[0], "ok1", wire.BatchApplied, 201)
	for _, r := range rs[1:4] {
		require.Equal(t, wire.BatchRetry, r.Outcome, "%s: %+v", r.Key, r)
		require.GreaterOrEqual(t, r.Status, 500, "%s: %+v", r.Key, r)
		require.Equal(t, 0, e.effectsOf(r.Key), "%s: the failed mutation's write stayed", r.Key)
	}
	wantOutcome(t, rs[4], "ok2", wire.BatchApplied, 201)
	wantEffects(t, e, 2)
	rs = e.wantBatch(breq{user: "alice", muts: muts})
	wantOutcome(t, rs[0], "ok1", wire.BatchReplayed, 201)
	for _, r := range rs[1:4] {
		wantOutcome(t, r, r.Key, wire.BatchApplied, 201) // a fresh run, not a stored failure
	}
	wantOutcome(t, rs[4], "ok2", wire.BatchReplayed, 201)
	wantEffects(t, e, 5)
}

// testBatchFailedStatement: a handler whose SQL statement fails (a
// constraint violation, which on PostgreSQL aborts the transaction until a
// rollback) and that answers 409 or 503 loses its writes to its savepoint;
// the 409 is stored, and the later mutations of other entities in the same
// batch run their statements and commit.
func testBatchFailedStatement(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	ctx := context.Background()
	tx, err := e.store.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO conf_unique (v) VALUES ('taken')`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	muts := []wire.BatchMutation{
		mut("a1", "A", okBody), mut("d1", "D", `{"mode":"dupreject","data":"taken"}`), mut("d2", "D", okBody),
		mut("b1", "B", `{"mode":"dupreject","data":"fresh"}`), mut("f1", "F", `{"mode":"dupfail","data":"taken"}`),
		mut("c1", "C", `{"mode":"text","data":"after"}`),
	}
	rs := e.wantBatch(breq{user: "alice", muts: muts})
	wantOutcome(t, rs[0], "a1", wire.BatchApplied, 201)
	wantOutcome(t, rs[1], "d1", wire.BatchRejected, 409)
	wantOutcome(t, rs[2], "d2", wire.BatchNotAttempted, 0)
	wantOutcome(t, rs[3], "b1", wire.BatchApplied, 201)
	wantOutcome(t, rs[4], "f1", wire.BatchRetry, 503)
	wantOutcome(t, rs[5], "c1", wire.BatchApplied, 201)
	for key, n := range map[string]int{"a1": 1, "d1": 0, "d2": 0, "b1": 1, "f1": 0, "c1": 1} {
		require.Equal(t, n, e.effectsOf(key), "%s: committed effects", key)
	}
	var unique, text int64
	require.NoError(t, e.store.View(ctx, func(q receiver.Tx) error {
		if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM conf_unique`).Scan(&unique); err != nil {
			return err
		}
		return q.QueryRow(ctx, `SELECT COUNT(*) FROM conf_text WHERE idem_key = 'c1'`).Scan(&text)
	}))
	require.Equal(t, []int64{2, 1}, []int64{unique, text}, "b1's and c1's rows after the failed statements")
	// Sent again: the 409 is replayed (stored), the 503 runs again.
	rs = e.wantBatch(breq{user: "alice", muts: muts})
	wantOutcome(t, rs[1], "d1", wire.BatchReplayed, 409)
	wantOutcome(t, rs[4], "f1", wire.BatchRetry, 503)
	require.Equal(t, 2, e.attemptsOf("f1"), "handler runs of f1: its 503 was not stored, the resend runs it")
	require.Equal(t, 1, e.attemptsOf("d1"), "handler runs of d1: its 409 was stored, the resend replays it")
}

// testBatchUnparsed: a mutation whose first statement the database refuses
// before running it (an unknown table) rolls back to its own savepoint,
// never to the one of an earlier mutation whose answer is stored: the
// mutations before and after it keep their writes, and a resend replays
// them.
func testBatchUnparsed(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	muts := []wire.BatchMutation{mut("a1", "A", okBody), mut("b1", "B", `{"mode":"badsql"}`), mut("c1", "C", okBody)}
	rs := e.wantBatch(breq{user: "alice", muts: muts})
	wantOutcome(t, rs[0], "a1", wire.BatchApplied, 201)
	require.Contains(t, []wire.BatchOutcome{wire.BatchRetry, wire.BatchRejected}, rs[1].Outcome, "b1: outcome %q", rs[1].Outcome)
	wantOutcome(t, rs[2], "c1", wire.BatchApplied, 201)
	for key, n := range map[string]int{"a1": 1, "c1": 1} {
		require.Equal(t, n, e.effectsOf(key), "%s: answered applied, committed effects", key)
	}
	rs = e.wantBatch(breq{user: "alice", muts: muts})
	wantOutcome(t, rs[0], "a1", wire.BatchReplayed, 201)
	wantOutcome(t, rs[2], "c1", wire.BatchReplayed, 201)
	wantEffects(t, e, 2)
}

// testBatchStale: a batch with a stale token is refused whole, as a single
// request would be, and stores nothing: the new owner runs the same keys.
func testBatchStale(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	t1 := e.issue("alice", "doc:1")
	t2 := e.issue("alice", "doc:1")
	rs := e.wantBatch(breq{user: "alice", resource: "doc:1", token: tok(t2), muts: []wire.BatchMutation{mut("new", "a", okBody)}})
	wantOutcome(t, rs[0], "new", wire.BatchApplied, 201)
	muts := []wire.BatchMutation{mut("o1", "a", okBody), mut("o2", "b", okBody), mut("o3", "a", rejectBody)}
	r, _ := e.batch(breq{user: "alice", resource: "doc:1", token: tok(t1), muts: muts})
	want(t, r, 409)
	p := r.problem(t)
	require.Equal(t, wire.ProblemStaleToken, p.Type, "stale batch: %+v", p)
	require.Equal(t, t2, p.Highest, "stale batch: %+v", p)
	require.Equal(t, tok(t2), r.header.Get(wire.HeaderFencingHighest), "stale batch header")
	require.Equal(t, wire.OutcomeStale, wire.Classify(r.status, true), "client would not step down")
	wantEffects(t, e, 1)
	require.Equal(t, 1, e.finished(), "the stale batch stored records")
	rs = e.wantBatch(breq{user: "alice", resource: "doc:1", token: tok(t2), muts: muts})
	wantOutcome(t, rs[0], "o1", wire.BatchApplied, 201)
	wantOutcome(t, rs[1], "o2", wire.BatchApplied, 201)
	wantOutcome(t, rs[2], "o3", wire.BatchRejected, 422)
	require.Contains(t, string(rs[0].Body), `"token":`+tok(t2), "the handler saw another token than the batch's")
	wantEffects(t, e, 3)
}

// testBatchStaleRace: the old owner's batch passes any read-only check while
// the new owner's request runs; the check in the write transaction refuses it.
func testBatchStaleRace(t *testing.T, newDB NewDB) {
	begun := make(chan struct{}, 1)
	e := newEnv(t, newDB, func(e *env) {
		e.wrap = func(st receiver.Store) receiver.Store { return &beginSignal{Store: st, begun: begun} }
	})
	t1 := e.issue("alice", "doc:1")
	t2 := e.issue("alice", "doc:1")
	newDone := make(chan reply, 1)
	go func() {
		r, err := e.try(req{user: "alice", key: "new", resource: "doc:1", token: tok(t2), body: `{"mode":"block"}`})
		assert.NoError(t, err)
		newDone <- r
	}()
	select {
	case <-e.started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not start")
	}
	select {
	case <-begun: // the new request's own transactions
	default:
	}
	oldDone := make(chan reply, 1)
	go func() {
		r, _, err := e.tryBatch(e.srv.URL, breq{user: "alice", resource: "doc:1", token: tok(t1),
			muts: []wire.BatchMutation{mut("o1", "a", okBody), mut("o2", "b", okBody)}})
		assert.NoError(t, err)
		oldDone <- r
	}()
	select { // the old batch passed its pre-check and begins its write transaction
	case <-begun:
	case <-time.After(10 * time.Second):
		t.Fatal("the old batch did not pass its pre-check")
	}
	close(e.unblock)
	want(t, <-newDone, 201)
	r := <-oldDone
	want(t, r, 409)
	p := r.problem(t)
	require.Equal(t, wire.ProblemStaleToken, p.Type, "problem %+v, want stale with highest %d", p, t2)
	require.Equal(t, t2, p.Highest, "problem %+v, want stale with highest %d", p, t2)
	wantEffects(t, e, 1)
}

// testBatchCrash: the process dies in the middle of a batch, after some
// mutations ran and wrote: the transaction never commits, so after a
// restart nothing of the batch is there, and its retry applies each
// mutation once.
func testBatchCrash(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, func(e *env) {
		e.opts.ClaimTTL = time.Minute
		e.wrap = func(st receiver.Store) receiver.Store { return &crashStore{Store: st, e: e} }
	})
	muts := []wire.BatchMutation{
		mut("c1", "A", okBody), mut("c2", "B", okBody), mut("c3", "C", `{"mode":"crashonce"}`), mut("c4", "D", okBody),
	}
	r, _, err := e.tryBatch(e.srv.URL, breq{user: "alice", muts: muts})
	require.True(t, err != nil || r.status != 200, "a batch whose process died answered 200: %s", r.body)
	require.True(t, e.crashed.Load(), "the crash did not happen")
	e.stop()
	e.crashed.Store(false)
	e.start()
	wantEffects(t, e, 0)
	require.Equal(t, 0, e.finished(), "records of a batch that never committed")
	// The claims were taken inside the batch's transaction, which never
	// committed: none is left behind, and the first resend applies all.
	applied := map[string]int{}
	for _, r := range e.wantBatch(breq{user: "alice", muts: muts}) {
		require.Equal(t, wire.BatchApplied, r.Outcome, "%s after the crash: %+v", r.Key, r)
		applied[r.Key]++
	}
	for _, m := range muts {
		require.Equal(t, 1, applied[m.Key], "%s applied %d times", m.Key, applied[m.Key])
		require.Equal(t, 1, e.effectsOf(m.Key), "%s effects", m.Key)
	}
	wantEffects(t, e, len(muts))
}

// testBatchClientGone: the client hangs up while its batch runs (a tab
// closed mid-flush). The batch still runs to its end, whole, and the
// resend gets every mutation's stored answer: each took effect once.
func testBatchClientGone(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	muts := []wire.BatchMutation{mut("g1", "A", okBody), mut("g2", "B", `{"mode":"block"}`), mut("g3", "C", okBody)}
	body := string(wire.AppendBatchRequest(nil, muts))
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	require.NoError(t, err)
	_, err = fmt.Fprintf(conn, "POST /things/batch HTTP/1.1\r\nHost: x\r\nX-Test-User: alice\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	require.NoError(t, err)
	select {
	case <-e.started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not start")
	}
	_ = conn.Close() // the client is gone, g2 still running
	close(e.unblock)
	rs := e.wantBatch(breq{user: "alice", muts: muts})
	for _, r := range rs {
		wantOutcome(t, r, r.Key, wire.BatchReplayed, 201)
	}
	wantEffects(t, e, 3)
}
