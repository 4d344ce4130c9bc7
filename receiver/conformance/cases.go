package conformance

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/wire"
)

// Run runs every conformance case against stores made by newDB. Cases run
// in parallel, each on its own database.
func Run(t *testing.T, newDB NewDB) {
	for _, c := range append(append(cases, hostileCases...), batchCases...) {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newDB)
		})
	}
}

var cases = []struct {
	name string
	fn   func(*testing.T, NewDB)
}{
	{"NewKey", testNewKey},
	{"StoredResultReplayed", testStoredResultReplayed},
	{"StoredPermanentFailureReplayed", testPermanentFailureReplayed},
	{"MissingKey", testMissingKey},
	{"MalformedKey", testMalformedKey},
	{"SameKeyDifferentPayload", testSameKeyDifferentPayload},
	{"InFlightDuplicate", testInFlightDuplicate},
	{"ServerErrorNotStored", testServerErrorNotStored},
	{"StaleTokenRejectedWithHighest", testStaleToken},
	{"StaleTokenRaceRejectedInTransaction", testStaleRace},
	{"EqualTokenAccepted", testEqualToken},
	{"ForgedTokenRejected", testForgedToken},
	{"MalformedFencingHeaders", testMalformedFencing},
	{"FinishedKeyReplaysEvenWhenTokenStale", testReplayBeforeFence},
	{"KeyOfAnotherUserNotReplayed", testOtherUser},
	{"ResponseLostAfterCommit", testResponseLost},
	{"HundredConcurrentOneKey", testConcurrent},
	{"RestartBetweenAttempts", testRestart},
	{"BodyTooLarge", testBodyTooLarge},
	{"Unauthenticated", testUnauthenticated},
	{"ReaperRemovesExpired", testReaper},
	{"CrashedClaimExpires", testCrashedClaim},
	{"SessionMismatchRefused", testSessionMismatch},
}

func want(t *testing.T, r reply, status int) {
	t.Helper()
	require.Equal(t, status, r.status, "status = %d, want %d; body %s", r.status, status, r.body)
}

func wantEffects(t *testing.T, e *env, n int) {
	t.Helper()
	require.Equal(t, n, e.effects(), "effects")
}

func testNewKey(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	r := e.do(req{user: "alice", key: "k1", body: okBody})
	want(t, r, 201)
	require.False(t, r.replayed(), "first answer marked as replayed")
	wantEffects(t, e, 1)
}

func testStoredResultReplayed(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	first := e.do(req{user: "alice", key: "k1", body: okBody})
	want(t, first, 201)
	for i := 0; i < 3; i++ {
		r := e.do(req{user: "alice", key: `"k1"`, body: okBody}) // sf-string form is the same key
		want(t, r, 201)
		require.True(t, r.replayed(), "replay %d: replayed=%v body %s, want %s", i, r.replayed(), r.body, first.body)
		require.Equal(t, string(first.body), string(r.body), "replay %d: replayed=%v body %s, want %s", i, r.replayed(), r.body, first.body)
		require.Equal(t, "/things/k1", r.header.Get("Location"), "replay lost headers: %v", r.header)
		require.Equal(t, "application/json", r.header.Get("Content-Type"), "replay lost headers: %v", r.header)
		require.Equal(t, "", r.header.Get("X-Not-Stored"), "replay carries a header that is not in the stored set")
	}
	wantEffects(t, e, 1)
}

func testPermanentFailureReplayed(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	body := `{"mode":"reject"}`
	r := e.do(req{user: "alice", key: "k1", body: body})
	want(t, r, 422)
	r = e.do(req{user: "alice", key: "k1", body: body})
	want(t, r, 422)
	require.True(t, r.replayed(), "stored 422 not replayed")
	require.Equal(t, wire.ProblemBase+"invalid", r.problem(t).Type, "type")
	wantEffects(t, e, 0) // the handler's write before rejecting was rolled back
}

func testMissingKey(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	r := e.do(req{user: "alice", body: okBody})
	want(t, r, 400)
	require.Equal(t, wire.ProblemMissingKey, r.problem(t).Type, "type")
	wantEffects(t, e, 0)
}

func testMalformedKey(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	for _, k := range []string{`""`, `"`, `"abc`, `a b`, `ab"c`, `a\b`, strings.Repeat("k", 256), "é", `"a"b"`} {
		r := e.do(req{user: "alice", key: k, body: okBody})
		want(t, r, 400)
		p := r.problem(t)
		require.Equal(t, wire.ProblemMalformedKey, p.Type, "key %q: type %q", k, p.Type)
	}
	want(t, e.do(req{user: "alice", key: strings.Repeat("k", 255), body: okBody}), 201)
	wantEffects(t, e, 1)
}

func testSameKeyDifferentPayload(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	want(t, e.do(req{user: "alice", key: "k1", body: okBody}), 201)
	r := e.do(req{user: "alice", key: "k1", body: `{"mode":"ok","data":"other"}`})
	want(t, r, 422)
	require.Equal(t, wire.ProblemKeyReuse, r.problem(t).Type, "type")
	wantEffects(t, e, 1)
}

func testInFlightDuplicate(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	body := `{"mode":"block"}`
	done := make(chan reply, 1)
	go func() {
		r, err := e.try(req{user: "alice", key: "k1", body: body})
		assert.NoError(t, err)
		done <- r
	}()
	select {
	case <-e.started:
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not start")
	}
	r := e.do(req{user: "alice", key: "k1", body: body})
	want(t, r, 409)
	require.Equal(t, wire.ProblemInFlight, r.problem(t).Type, "type")
	require.Equal(t, "", r.header.Get(wire.HeaderFencingHighest), "in-flight 409 must not carry X-Fencing-Highest (the client would step down)")
	close(e.unblock)
	want(t, <-done, 201)
	r = e.do(req{user: "alice", key: "k1", body: body})
	want(t, r, 201)
	require.True(t, r.replayed(), "retry after completion not replayed")
	wantEffects(t, e, 1)
}

func testServerErrorNotStored(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	for i, mode := range []string{"flaky500", "flakyerr", "flakypanic"} {
		key := fmt.Sprintf("k%d", i)
		body := `{"mode":"` + mode + `"}`
		r := e.do(req{user: "alice", key: key, body: body})
		require.GreaterOrEqual(t, r.status, 500, "%s: status %d", mode, r.status)
		require.NotContains(t, string(r.body), "fire", "%s: error text leaked: %s", mode, r.body)
		require.NotContains(t, string(r.body), "handler bug", "%s: error text leaked: %s", mode, r.body)
		wantEffects(t, e, i)
		r = e.do(req{user: "alice", key: key, body: body})
		want(t, r, 201)
		require.False(t, r.replayed(), "%s: retry was a replay, want a fresh run", mode)
		wantEffects(t, e, i+1)
	}
}

func testStaleToken(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	t1 := e.issue("alice", "doc:1")
	t2 := e.issue("alice", "doc:1")
	require.Greater(t, t2, t1, "tokens not monotonic: %d then %d", t1, t2)
	want(t, e.do(req{user: "alice", key: "new", resource: "doc:1", token: tok(t2), body: okBody}), 201)
	r := e.do(req{user: "alice", key: "old", resource: "doc:1", token: tok(t1), body: okBody})
	want(t, r, 409)
	p := r.problem(t)
	require.Equal(t, wire.ProblemStaleToken, p.Type, "stale rejection %+v header %q, want highest %d", p, r.header.Get(wire.HeaderFencingHighest), t2)
	require.Equal(t, t2, p.Highest, "stale rejection %+v header %q, want highest %d", p, r.header.Get(wire.HeaderFencingHighest), t2)
	require.Equal(t, tok(t2), r.header.Get(wire.HeaderFencingHighest), "stale rejection %+v header %q, want highest %d", p, r.header.Get(wire.HeaderFencingHighest), t2)
	require.Equal(t, wire.OutcomeStale, wire.Classify(r.status, true), "client would not step down")
	wantEffects(t, e, 1)
	// The rejection stored nothing: the new owner may run the same key.
	r = e.do(req{user: "alice", key: "old", resource: "doc:1", token: tok(t2), body: okBody})
	want(t, r, 201)
	require.False(t, r.replayed(), "stale rejection was stored")
	wantEffects(t, e, 2)
}

func testEqualToken(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	t1 := e.issue("alice", "doc:1")
	for i := 0; i < 3; i++ {
		want(t, e.do(req{user: "alice", key: fmt.Sprint("k", i), resource: "doc:1", token: tok(t1), body: okBody}), 201)
	}
	wantEffects(t, e, 3)
}

func testForgedToken(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	t1 := e.issue("alice", "doc:1")
	for _, c := range []struct{ user, res, tok string }{
		{"alice", "doc:1", tok(t1 + 1)},
		{"alice", "doc:1", tok(wire.MaxToken)},
		{"alice", "doc:never", "1"},
		{"bob", "doc:1", tok(t1)}, // issued to alice, not to bob
	} {
		r := e.do(req{user: c.user, key: "k1", resource: c.res, token: c.tok, body: okBody})
		want(t, r, 400)
		p := r.problem(t)
		require.Equal(t, wire.ProblemForgedToken, p.Type, "%+v: type %q", c, p.Type)
	}
	wantEffects(t, e, 0)
	// A forged token must not have raised the highest accepted.
	want(t, e.do(req{user: "alice", key: "k1", resource: "doc:1", token: tok(t1), body: okBody}), 201)
	wantEffects(t, e, 1)
}

func testMalformedFencing(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	e.issue("alice", "doc:1")
	for _, c := range []struct{ res, tok string }{
		{"doc:1", ""}, {"", "1"}, {"doc:1", "0"}, {"doc:1", "01"}, {"doc:1", "-1"}, {"doc:1", "1.0"},
		{"doc:1", "9007199254740992"}, {"doc 1", "1"}, {"doc:1", "abc"}, {strings.Repeat("r", 201), "1"},
	} {
		r := e.do(req{user: "alice", key: "k1", resource: c.res, token: c.tok, body: okBody})
		want(t, r, 400)
		p := r.problem(t)
		require.Equal(t, wire.ProblemMalformedToken, p.Type, "%+v: type %q", c, p.Type)
	}
	wantEffects(t, e, 0)
}

func testReplayBeforeFence(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	t1 := e.issue("alice", "doc:1")
	want(t, e.do(req{user: "alice", key: "k1", resource: "doc:1", token: tok(t1), body: okBody}), 201)
	t2 := e.issue("alice", "doc:1")
	want(t, e.do(req{user: "alice", key: "k2", resource: "doc:1", token: tok(t2), body: okBody}), 201)
	r := e.do(req{user: "alice", key: "k1", resource: "doc:1", token: tok(t1), body: okBody})
	want(t, r, 201)
	require.True(t, r.replayed(), "finished key not replayed once its token went stale")
	wantEffects(t, e, 2)
}

func testOtherUser(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	want(t, e.do(req{user: "alice", key: "shared", body: okBody}), 201)
	r := e.do(req{user: "bob", key: "shared", body: okBody})
	want(t, r, 201)
	require.False(t, r.replayed(), "bob got alice's stored answer")
	wantEffects(t, e, 2)
	// Fences are per scope too.
	a, b := e.issue("alice", "doc:1"), e.issue("bob", "doc:1")
	require.Equal(t, uint64(1), a, "tokens alice %d bob %d, want 1 and 1", a, b)
	require.Equal(t, uint64(1), b, "tokens alice %d bob %d, want 1 and 1", a, b)
}

// testResponseLost commits a request, then drops the client's connection
// before the answer reaches it, as Chromium sees when a keep-alive
// connection dies. The retry must get the stored answer and no new effect.
func testResponseLost(t *testing.T, newDB NewDB) {
	committed := make(chan struct{})
	gone := make(chan struct{})
	var once sync.Once
	e := newEnv(t, newDB, func(e *env) {
		e.mw = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Lose-Response") != "" {
					w = &holdWriter{ResponseWriter: w, hold: func() {
						once.Do(func() { close(committed); <-gone })
					}}
				}
				next.ServeHTTP(w, r)
			})
		}
	})
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.srv.URL, "http://"))
	require.NoError(t, err)
	raw := "POST /things HTTP/1.1\r\nHost: x\r\nX-Test-User: alice\r\nX-Lose-Response: 1\r\n" +
		"Idempotency-Key: lost\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(len(okBody)) + "\r\n\r\n" + okBody
	_, err = conn.Write([]byte(raw))
	require.NoError(t, err)
	select {
	case <-committed:
	case <-time.After(10 * time.Second):
		t.Fatal("request never committed")
	}
	_ = conn.Close() // the answer is lost
	close(gone)
	wantEffects(t, e, 1)
	// A late read on the dropped connection must see nothing useful.
	_, _ = bufio.NewReader(conn).ReadString('\n')
	r := e.do(req{user: "alice", key: "lost", body: okBody})
	want(t, r, 201)
	require.True(t, r.replayed(), "retry after lost response ran again")
	wantEffects(t, e, 1)
}

// holdWriter calls hold before the status line is written: by then the
// receiver has committed.
type holdWriter struct {
	http.ResponseWriter
	hold func()
}

func (w *holdWriter) WriteHeader(code int) { w.hold(); w.ResponseWriter.WriteHeader(code) }
func (w *holdWriter) Write(b []byte) (int, error) {
	w.hold()
	return w.ResponseWriter.Write(b)
}

func testConcurrent(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	e.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 100
	const n = 100
	var wg sync.WaitGroup
	replies := make([]reply, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			replies[i], errs[i] = e.try(req{user: "alice", key: "hot", body: okBody})
		}(i)
	}
	close(start)
	wg.Wait()
	fresh, replayed, inflight := 0, 0, 0
	for i, r := range replies {
		require.NoError(t, errs[i], "request %d", i)
		switch {
		case r.status == 201 && r.replayed():
			replayed++
		case r.status == 201:
			fresh++
		case r.status == 409:
			require.Equal(t, wire.ProblemInFlight, r.problem(t).Type, "409 of type")
			inflight++
		default:
			t.Fatalf("request %d: status %d body %s", i, r.status, r.body)
		}
	}
	t.Logf("fresh %d, replayed %d, in flight %d", fresh, replayed, inflight)
	require.Equal(t, 1, fresh, "%d requests ran the handler, want exactly 1", fresh)
	wantEffects(t, e, 1)
}

func testRestart(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	t1 := e.issue("alice", "doc:1")
	want(t, e.do(req{user: "alice", key: "k1", resource: "doc:1", token: tok(t1), body: okBody}), 201)
	e.restart()
	r := e.do(req{user: "alice", key: "k1", resource: "doc:1", token: tok(t1), body: okBody})
	want(t, r, 201)
	require.True(t, r.replayed(), "stored answer lost across restart")
	t2 := e.issue("alice", "doc:1")
	require.Equal(t, t1+1, t2, "token after restart %d, want %d (never reused)", t2, t1+1)
	r = e.do(req{user: "alice", key: "k2", resource: "doc:1", token: tok(t1 - 0), body: okBody})
	want(t, r, 201) // equal to the highest accepted: still fine
	wantEffects(t, e, 2)
}

func testBodyTooLarge(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	big := `{"mode":"ok","data":"` + strings.Repeat("x", 5000) + `"}`
	r := e.do(req{user: "alice", key: "k1", body: big})
	want(t, r, 413)
	require.Equal(t, wire.ProblemBodyTooLarge, r.problem(t).Type, "type")
	wantEffects(t, e, 0)
	r = e.do(req{user: "alice", key: "k1", body: okBody})
	want(t, r, 201) // nothing was stored under the key
}

func testUnauthenticated(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	r := e.do(req{key: "k1", body: okBody})
	want(t, r, 401)
	require.Equal(t, wire.ProblemUnauthenticated, r.problem(t).Type, "type")
	hr, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/fence/doc:1", nil)
	resp, err := e.client.Do(hr)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 401, resp.StatusCode, "fence without user")
	wantEffects(t, e, 0)
	r = e.do(req{user: "alice", key: "k1", body: okBody})
	want(t, r, 201)
	require.False(t, r.replayed(), "401 was stored")
}

func testReaper(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, func(e *env) { e.opts.Retention = time.Hour })
	want(t, e.do(req{user: "alice", key: "k1", body: okBody}), 201)
	want(t, e.do(req{user: "alice", key: "k2", body: okBody}), 201)
	ctx := context.Background()
	if n, err := e.rc.Reap(ctx); err != nil || n != 0 {
		t.Fatalf("early reap: %d, %v", n, err)
	}
	e.clock.advance(time.Hour + time.Second)
	// Past retention, even before the reaper runs, the key runs again.
	r := e.do(req{user: "alice", key: "k1", body: okBody})
	want(t, r, 201)
	require.False(t, r.replayed(), "expired record replayed")
	n, err := e.rc.Reap(ctx)
	require.NoError(t, err, "reap: %d, %v; want 1 (k2)", n, err)
	require.Equal(t, int64(1), n, "reap: %d, %v; want 1 (k2)", n, err)
	r = e.do(req{user: "alice", key: "k2", body: okBody})
	want(t, r, 201)
	require.False(t, r.replayed(), "reaped record replayed")
	wantEffects(t, e, 4)
}

// testCrashedClaim leaves an in-flight claim behind as a crashed process
// would, and checks that it blocks retries only until ClaimTTL.
func testCrashedClaim(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, func(e *env) { e.opts.ClaimTTL = time.Minute })
	ctx := context.Background()
	now := e.clock.now().UnixMilli()
	tx, err := e.store.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO tabfence_idempotency
		(scope, idem_key, fingerprint, state, claim, claim_expires, status, header, body, created, expires)
		VALUES ($1, $2, $3, 1, 'dead', $4, 0, '', $5, $6, $7)`,
		"alice", "k1", receiver.Fingerprint("POST", "/things", "alice", []byte(okBody)),
		now+time.Minute.Milliseconds(), []byte{}, now, now+time.Hour.Milliseconds())
	if err == nil {
		err = tx.Commit()
	}
	require.NoError(t, err)
	want(t, e.do(req{user: "alice", key: "k1", body: okBody}), 409)
	e.clock.advance(2 * time.Minute)
	r := e.do(req{user: "alice", key: "k1", body: okBody})
	want(t, r, 201)
	wantEffects(t, e, 1)
}

// testStaleRace makes the old leader's request pass the read-only pre-check
// while the new leader's request is still running, so the stale token is
// caught by the check inside the write transaction.
func testStaleRace(t *testing.T, newDB NewDB) {
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
		r, err := e.try(req{user: "alice", key: "old", resource: "doc:1", token: tok(t1), body: okBody})
		assert.NoError(t, err)
		oldDone <- r
	}()
	select { // the old request passed its pre-check and begins a write transaction
	case <-begun:
	case <-time.After(10 * time.Second):
		t.Fatal("the old request did not pass its pre-check")
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
