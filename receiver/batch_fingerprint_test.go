package receiver_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/pgstore"
	"github.com/tabfence/tabfence/receiver/pgstore/pgtest"
	"github.com/tabfence/tabfence/wire"
)

// single POSTs one mutation to /single, the endpoint batchEnv's mutations
// name, with extra headers.
func (e *batchEnv) single(key string, payload []byte, hdr ...string) (*http.Response, []byte, error) {
	req, _ := http.NewRequest("POST", e.srv.URL+"/single", bytes.NewReader(payload))
	req.Header.Set("X-Test-User", "alice")
	req.Header.Set(wire.HeaderIdempotencyKey, `"`+key+`"`)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp, raw, err
}

// A record sent alone and then in a batch under the same key (a lost
// response, the outbox switching to batches) is the same mutation: the
// batch replays the single answer. And the reverse.
func TestBatchSameKeyAloneAndInBatch(t *testing.T) {
	eachStore(t, receiver.Options{}, func(t *testing.T, e *batchEnv) {
		first := mut("alone", "ok", "A")
		resp, body, err := e.single(first.Key, first.Payload)
		require.NoError(t, err)
		require.Equal(t, 201, resp.StatusCode, "%s", body)
		_, rs, raw := e.post([]wire.BatchMutation{first})
		require.Equal(t, []string{"replayed Created"}, outcomes(rs), "%s", raw)
		require.JSONEq(t, string(body), string(rs[0].Body))

		second := mut("batched", "ok", "B")
		_, rs, _ = e.post([]wire.BatchMutation{second})
		require.Equal(t, []string{"applied Created"}, outcomes(rs))
		resp, body, err = e.single(second.Key, second.Payload)
		require.NoError(t, err)
		require.Equal(t, 201, resp.StatusCode, "%s", body)
		require.Equal(t, "true", resp.Header.Get(wire.HeaderReplayed))
		require.JSONEq(t, string(rs[0].Body), string(body))

		require.Equal(t, int64(2), e.runs.Load(), "each mutation ran once")
		require.Equal(t, []int{1, 1}, []int{e.effects("alone"), e.effects("batched")})
	})
}

// A batch mutation whose key a single request is running right now is
// answered retry, in flight, with a Retry-After; it does not run.
// PostgreSQL only: SQLite's single writer holds the batch until the
// single request has committed (then it replays, as above).
func TestBatchKeyInFlightAlone(t *testing.T) {
	st, err := pgstore.Open(context.Background(), pgtest.SchemaURL(t), 0)
	require.NoError(t, err)
	e := newBatchEnv(t, st, receiver.Options{})
	m := mut("busy", "ok", "A")
	type answer struct {
		resp *http.Response
		body []byte
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, body, err := e.single(m.Key, m.Payload, "X-Test-Block", "1")
		done <- answer{resp, body, err}
	}()
	select {
	case <-e.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the single request's handler did not start")
	}
	_, rs, raw := e.post([]wire.BatchMutation{m, mut("other", "ok", "B")})
	close(e.unblock)
	require.Equal(t, []string{"retry Conflict", "applied Created"}, outcomes(rs), "%s", raw)
	require.Equal(t, wire.ProblemInFlight, rs[0].Problem)
	require.GreaterOrEqual(t, rs[0].RetryAfter, time.Second)
	a := <-done
	require.NoError(t, a.err)
	require.Equal(t, 201, a.resp.StatusCode, "%s", a.body)
	require.Equal(t, 1, e.effects("busy"), "the key ran once, alone")
	_, rs, _ = e.post([]wire.BatchMutation{m})
	require.Equal(t, []string{"replayed Created"}, outcomes(rs))
}

// A batch that takes longer than Options.Timeout commits the mutations it
// had time for and answers the rest retry (a later one of their entity not
// attempted), so each resend makes progress; it is not rolled back whole.
func TestBatchTimeBudget(t *testing.T) {
	eachStore(t, receiver.Options{Timeout: 2 * time.Second}, func(t *testing.T, e *batchEnv) {
		var ms []wire.BatchMutation
		for i := 0; i < 10; i++ { // 3 s of work
			ms = append(ms, mut(fmt.Sprintf("s%d", i), "slow", fmt.Sprintf("E%d", i)))
		}
		ms = append(ms, mut("s10", "ok", "E9")) // behind s9, which will not start
		resp, rs, raw := e.post(ms)
		require.Equal(t, 200, resp.StatusCode, "%s", raw)
		done := 0
		for done < len(rs) && rs[done].Outcome == wire.BatchApplied {
			done++
		}
		require.Greater(t, done, 0, "no mutation applied: %v", outcomes(rs))
		require.Less(t, done, 10, "all applied within a 2 s budget: %v", outcomes(rs))
		for _, r := range rs[done:10] {
			require.Equal(t, wire.BatchRetry, r.Outcome, "%v", outcomes(rs))
			require.Equal(t, wire.ProblemBusy, r.Problem)
		}
		require.Equal(t, wire.BatchNotAttempted, rs[10].Outcome)
		require.Equal(t, 1, e.effects("s0"), "the prefix is committed")
		require.Equal(t, 0, e.effects("s9"))

		for attempt := 0; rs[10].Outcome != wire.BatchApplied; attempt++ {
			require.Less(t, attempt, 5, "the batch is not through: %v", outcomes(rs))
			_, rs, raw = e.post(ms)
			require.NotNil(t, rs, "%s", raw)
		}
		for _, m := range ms {
			require.Equal(t, 1, e.effects(m.Key), m.Key)
		}
		require.Equal(t, int64(len(ms)), e.runs.Load(), "each mutation ran once")
	})
}

// hookStore calls begin after each write transaction begins, and before
// and after around every statement it runs (those set): the tests count
// statements and widen race windows with them.
type hookStore struct {
	receiver.Store
	before, after func(query string)
	query         func(query string) // before each Query
	begin         func()
}

func (s *hookStore) Begin(ctx context.Context) (receiver.WriteTx, error) {
	tx, err := s.Store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if s.begin != nil {
		s.begin()
	}
	return hookTx{tx, s}, nil
}

type hookTx struct {
	receiver.WriteTx
	s *hookStore
}

func (t hookTx) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if t.s.before != nil {
		t.s.before(query)
	}
	n, err := t.WriteTx.Exec(ctx, query, args...)
	if t.s.after != nil {
		t.s.after(query)
	}
	return n, err
}

func (t hookTx) Query(ctx context.Context, query string, args ...any) (receiver.Rows, error) {
	if t.s.query != nil {
		t.s.query(query)
	}
	return t.WriteTx.Query(ctx, query, args...)
}

// waitLockWaiter waits until a backend waits on a lock, for a second at
// most (the code under test may rightly never make one wait).
func waitLockWaiter(e *batchEnv) {
	deadline := time.Now().Add(time.Second)
	for lockWaiters(e) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// On PostgreSQL a copy of a batch waits on the key's row a first copy is
// running; when that one's handler answers 4xx and its writes are rolled
// back, its claim stays: the waiting copy replays the rejection, the
// handler ran once, and no copy answers 500.
func TestBatchRejectKeepsClaim(t *testing.T) {
	st, err := pgstore.Open(context.Background(), pgtest.SchemaURL(t), 0)
	require.NoError(t, err)
	hs := &hookStore{Store: st}
	e := newBatchEnv(t, hs, receiver.Options{})
	// Right after the 4xx's rollback, the waiting copy gets its chance to
	// take the key (up to a second: with the claim kept it cannot).
	hs.after = func(query string) {
		if !strings.HasPrefix(query, "ROLLBACK TO SAVEPOINT") {
			return
		}
		deadline := time.Now().Add(time.Second)
		for lockWaiters(e) > 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	ms := []wire.BatchMutation{mut("r", "blockreject", "R")}
	first, second := make(chan []wire.BatchResult, 1), make(chan []wire.BatchResult, 1)
	body := wire.AppendBatchRequest(nil, ms)
	go func() { _, rs, _, _ := e.tryPost(body, keysOf(ms)); first <- rs }()
	select {
	case <-e.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first copy's handler did not start")
	}
	go func() { _, rs, _, _ := e.tryPost(body, keysOf(ms)); second <- rs }()
	require.Eventually(t, func() bool { return lockWaiters(e) > 0 }, 10*time.Second, 5*time.Millisecond,
		"the second copy never waited on the key")
	close(e.unblock)
	rs1, rs2 := <-first, <-second
	require.Equal(t, []string{"rejected Unprocessable Entity"}, outcomes(rs1))
	require.Equal(t, []string{"replayed Unprocessable Entity"}, outcomes(rs2))
	require.Equal(t, int64(1), e.runs.Load(), "the handler ran once")
}

// lockWaiters counts the database's backends waiting on a lock (0 when
// it cannot tell). It runs on server goroutines too: no require.
func lockWaiters(e *batchEnv) int {
	var n int64
	_ = e.store.View(context.Background(), func(q receiver.Tx) error {
		return q.QueryRow(context.Background(), `SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'`).Scan(&n)
	})
	return int(n)
}

// A single request and a batch with the same key and fenced resource, on
// PostgreSQL, lock the fence and the key in the same order: the single is
// held right before its fence check until the batch waits on a lock (if
// it ever does); neither fails with "deadlock detected".
func TestBatchAndSingleLockOrder(t *testing.T) {
	st, err := pgstore.Open(context.Background(), pgtest.SchemaURL(t), 0)
	require.NoError(t, err)
	hs := &hookStore{Store: st}
	e := newBatchEnv(t, hs, receiver.Options{})
	tok, err := e.rc.IssueToken(context.Background(), "alice", "leader")
	require.NoError(t, err)
	fence := []string{wire.HeaderResource, "leader", wire.HeaderFencingToken, wire.FormatToken(tok)}
	atFence := make(chan struct{})
	var once atomic.Bool
	hs.before = func(query string) {
		if strings.HasPrefix(query, "UPDATE tabfence_fences") && once.CompareAndSwap(false, true) {
			close(atFence) // the single request, first to reach its fence check
			waitLockWaiter(e)
		}
	}
	m := mut("both", "ok", "B")
	done := make(chan *http.Response, 1)
	go func() {
		resp, _, err := e.single(m.Key, m.Payload, fence...)
		if err != nil {
			resp = nil
		}
		done <- resp
	}()
	select {
	case <-atFence:
	case <-time.After(10 * time.Second):
		t.Fatal("the single request did not reach its fence check")
	}
	resp, rs, raw := e.post([]wire.BatchMutation{m}, fence...)
	require.Equal(t, 200, resp.StatusCode, "%s", raw)
	require.Contains(t, []wire.BatchOutcome{wire.BatchRetry, wire.BatchReplayed}, rs[0].Outcome, "%+v", rs[0])
	if rs[0].Outcome == wire.BatchRetry {
		require.Equal(t, wire.ProblemInFlight, rs[0].Problem, "%s", raw)
	}
	single := <-done
	require.NotNil(t, single)
	require.Equal(t, 201, single.StatusCode)
	require.Equal(t, 1, e.effects("both"))
}

// A batch of 100 mutations runs at most 64 of them under savepoints in one
// transaction (PostgreSQL's subtransaction cache), and all are applied.
func TestBatchSavepointsPerTransaction(t *testing.T) {
	eachStoreWith(t, func(st receiver.Store) receiver.Store { return &hookStore{Store: st} }, func(t *testing.T, e *batchEnv) {
		hs := e.store.(*hookStore)
		var mu sync.Mutex
		var txs []int // savepoints per write transaction, in order
		hs.begin = func() { mu.Lock(); txs = append(txs, 0); mu.Unlock() }
		hs.before = func(query string) {
			mu.Lock()
			defer mu.Unlock()
			if strings.HasPrefix(query, "SAVEPOINT") {
				txs[len(txs)-1]++
			}
		}
		var ms []wire.BatchMutation
		for i := 0; i < 100; i++ {
			ms = append(ms, mut(fmt.Sprintf("p%d", i), "ok", fmt.Sprintf("E%d", i%7)))
		}
		_, rs, raw := e.post(ms)
		require.Len(t, rs, 100, "%s", raw)
		for _, r := range rs {
			require.Equal(t, wire.BatchApplied, r.Outcome, "%+v", r)
		}
		mu.Lock()
		defer mu.Unlock()
		for i, n := range txs {
			require.LessOrEqual(t, n, 64, "transaction %d ran %d savepoints (%v)", i, n, txs)
		}
		for _, m := range ms {
			require.Equal(t, 1, e.effects(m.Key), m.Key)
		}
	})
}

// Two batches sharing keys in opposite orders, on PostgreSQL, claim them in
// one order (claimAll sorts): each is held after its first claim until the
// other has one too (if it ever can); neither fails with "deadlock
// detected", and each key runs once.
func TestBatchOverlappingKeysNoDeadlock(t *testing.T) {
	st, err := pgstore.Open(context.Background(), pgtest.SchemaURL(t), 0)
	require.NoError(t, err)
	hs := &hookStore{Store: st}
	e := newBatchEnv(t, hs, receiver.Options{})
	var arrived atomic.Int64
	hs.after = func(query string) {
		if !strings.HasPrefix(query, "INSERT INTO tabfence_idempotency") || arrived.Add(1) > 2 {
			return
		}
		deadline := time.Now().Add(time.Second)
		for arrived.Load() < 2 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	a, b := mut("ka", "ok", "A"), mut("kb", "ok", "B")
	type answer struct {
		status int
		rs     []wire.BatchResult
		raw    []byte
		err    error
	}
	answers := make(chan answer, 2)
	for _, ms := range [][]wire.BatchMutation{{a, b}, {b, a}} {
		go func() {
			resp, rs, raw, err := e.tryPost(wire.AppendBatchRequest(nil, ms), keysOf(ms))
			an := answer{rs: rs, raw: raw, err: err}
			if resp != nil {
				an.status = resp.StatusCode
			}
			answers <- an
		}()
	}
	for range 2 {
		an := <-answers
		require.NoError(t, an.err)
		require.Equal(t, 200, an.status, "%s", an.raw)
		for _, r := range an.rs {
			require.Contains(t, []wire.BatchOutcome{wire.BatchApplied, wire.BatchReplayed}, r.Outcome, "%+v", r)
		}
	}
	require.Equal(t, []int{1, 1}, []int{e.effects("ka"), e.effects("kb")})
	require.Equal(t, int64(2), e.runs.Load())
}
