package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/pgstore"
	"github.com/tabfence/tabfence/receiver/pgstore/pgtest"
	"github.com/tabfence/tabfence/receiver/sqlitestore"
	"github.com/tabfence/tabfence/wire"
)

// batchEnv is a receiver with HandleBatch on a real loopback listener. Its
// handler acts on the mutation's Operation: "ok" writes an effect row and
// answers 201, "reject" writes one and answers 422, "fail" writes one and
// answers 503 with Retry-After: 7 while failing is set (201 after),
// "panic" writes one and panics, "big" writes one and answers 201 with
// 300 control bytes (1,800 bytes once escaped in a batch's answer).
type batchEnv struct {
	t       testing.TB
	store   receiver.Store
	rc      *receiver.Receiver
	srv     *httptest.Server
	runs    atomic.Int64
	failing atomic.Bool
	// started and unblock hold a single request sent with X-Test-Block
	// in its handler (see single), or the first run of "blockreject".
	started chan struct{}
	unblock chan struct{}
	blocked atomic.Bool
}

// eachStore runs fn on SQLite and, when TABFENCE_PG_URL is set, PostgreSQL.
func eachStore(t *testing.T, opts receiver.Options, fn func(t *testing.T, e *batchEnv)) {
	eachStoreOpts(t, opts, func(st receiver.Store) receiver.Store { return st }, fn)
}

// eachStoreWith is eachStore with the store wrapped by wrap.
func eachStoreWith(t *testing.T, wrap func(receiver.Store) receiver.Store, fn func(t *testing.T, e *batchEnv)) {
	eachStoreOpts(t, receiver.Options{}, wrap, fn)
}

func eachStoreOpts(t *testing.T, opts receiver.Options, wrap func(receiver.Store) receiver.Store, fn func(t *testing.T, e *batchEnv)) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"))
		require.NoError(t, err)
		fn(t, newBatchEnv(t, wrap(st), opts))
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.SchemaURL(t)
		st, err := pgstore.Open(context.Background(), url, 0)
		require.NoError(t, err)
		fn(t, newBatchEnv(t, wrap(st), opts))
	})
}

func newBatchEnv(t testing.TB, st receiver.Store, opts receiver.Options) *batchEnv {
	e := &batchEnv{t: t, store: st, started: make(chan struct{}, 1), unblock: make(chan struct{})}
	ctx := context.Background()
	tx, err := st.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS batch_effects (k TEXT NOT NULL, payload TEXT NOT NULL)`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	opts.Scope = func(r *http.Request) (string, error) {
		if u := r.Header.Get("X-Test-User"); u != "" {
			return u, nil
		}
		return "", receiver.ErrUnauthenticated
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	e.rc = receiver.New(st, opts)
	mux := http.NewServeMux()
	mux.Handle("POST /batch", e.rc.HandleBatch(e.handle))
	mux.Handle("POST /single", e.rc.Handle(e.handle))
	e.srv = httptest.NewServer(mux)
	t.Cleanup(func() { e.srv.Close(); _ = st.Close() })
	return e
}

func (e *batchEnv) handle(ctx context.Context, tx receiver.Tx, r *receiver.Request) (receiver.Response, error) {
	e.runs.Add(1)
	if r.HTTP.Header.Get("X-Test-Block") != "" {
		e.started <- struct{}{}
		<-e.unblock
	}
	if _, err := tx.Exec(ctx, `INSERT INTO batch_effects (k, payload) VALUES ($1, $2)`, r.Key, string(r.Body)); err != nil {
		return receiver.Response{}, err
	}
	switch r.Operation {
	case "reject":
		return receiver.ProblemResponse(receiver.Problem{Type: wire.ProblemBase + "invalid", Title: "Invalid", Status: 422}), nil
	case "fail":
		if e.failing.Load() {
			return receiver.Response{Status: 503, Header: http.Header{"Retry-After": {"7"}}, Body: []byte("later")}, nil
		}
	case "panic":
		panic("handler bug")
	case "steal": // another claim takes the key over (as after ClaimTTL) before the answers are stored
		if _, err := tx.Exec(ctx, `UPDATE tabfence_idempotency SET claim = 'stolen' WHERE idem_key = $1`, r.Key); err != nil {
			return receiver.Response{}, err
		}
	case "blockreject": // the first run waits for unblock, every run answers 422
		if e.blocked.CompareAndSwap(false, true) {
			e.started <- struct{}{}
			<-e.unblock
		}
		return receiver.ProblemResponse(receiver.Problem{Type: wire.ProblemBase + "invalid", Title: "Invalid", Status: 422}), nil
	case "big":
		return receiver.Response{Status: http.StatusCreated, Body: bytes.Repeat([]byte{1}, 300)}, nil
	case "slow":
		time.Sleep(300 * time.Millisecond) // the work itself, not a wait for a condition
	}
	return receiver.JSON(http.StatusCreated, map[string]string{"key": r.Key, "entity": r.Entity})
}

// post sends ms as a batch with extra headers and returns the answer; for
// a 200 it decodes the results.
func (e *batchEnv) post(ms []wire.BatchMutation, hdr ...string) (*http.Response, []wire.BatchResult, []byte) {
	return e.postRaw(wire.AppendBatchRequest(nil, ms), keysOf(ms), hdr...)
}

func (e *batchEnv) postRaw(body []byte, keys []string, hdr ...string) (*http.Response, []wire.BatchResult, []byte) {
	resp, rs, raw, err := e.tryPost(body, keys, hdr...)
	require.NoError(e.t, err, "%s", raw)
	return resp, rs, raw
}

// tryPost is postRaw without require, for other goroutines than the test's.
func (e *batchEnv) tryPost(body []byte, keys []string, hdr ...string) (*http.Response, []wire.BatchResult, []byte, error) {
	req, _ := http.NewRequest("POST", e.srv.URL+"/batch", bytes.NewReader(body))
	req.Header.Set("X-Test-User", "alice")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return nil, nil, nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return resp, nil, raw, nil
	}
	rs, err := wire.ParseBatchResponse(raw, keys)
	return resp, rs, raw, err
}

// effects counts the effect rows of key that committed.
func (e *batchEnv) effects(key string) int {
	var n int64
	require.NoError(e.t, e.store.View(context.Background(), func(q receiver.Tx) error {
		return q.QueryRow(context.Background(), `SELECT COUNT(*) FROM batch_effects WHERE k = $1`, key).Scan(&n)
	}))
	return int(n)
}

func keysOf(ms []wire.BatchMutation) []string {
	ks := make([]string, len(ms))
	for i, m := range ms {
		ks[i] = m.Key
	}
	return ks
}

func mut(key, op, entity string) wire.BatchMutation {
	return wire.BatchMutation{Key: key, Endpoint: "/single", OperationID: "id-" + key, Operation: op, Entity: entity, Payload: []byte(`{"k":"` + key + `"}`)}
}

// outcomes lists each result's outcome and status, for one comparison.
func outcomes(rs []wire.BatchResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Outcome) + " " + http.StatusText(r.Status)
	}
	return out
}

func problemType(t *testing.T, body []byte) string {
	var p receiver.Problem
	require.NoError(t, json.Unmarshal(body, &p), "%s", body)
	return p.Type
}

// One batch holds a replayed, a new and a rejected mutation; each is
// answered as it would be alone, and resending the batch replays them all.
func TestBatchReplayedNewRejected(t *testing.T) {
	eachStore(t, receiver.Options{}, func(t *testing.T, e *batchEnv) {
		_, rs, _ := e.post([]wire.BatchMutation{mut("a", "ok", "A")})
		require.Equal(t, []string{"applied Created"}, outcomes(rs))
		require.JSONEq(t, `{"key":"a","entity":"A"}`, string(rs[0].Body))

		batch := []wire.BatchMutation{mut("a", "ok", "A"), mut("b", "ok", "B"), mut("c", "reject", "C")}
		resp, rs, _ := e.post(batch)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.Equal(t, []string{"replayed Created", "applied Created", "rejected Unprocessable Entity"}, outcomes(rs))
		require.JSONEq(t, `{"key":"a","entity":"A"}`, string(rs[0].Body), "the stored answer")
		require.Equal(t, wire.ProblemBase+"invalid", problemType(t, rs[2].Body))
		require.Equal(t, []int{1, 1, 0}, []int{e.effects("a"), e.effects("b"), e.effects("c")},
			"the rejection's own write is rolled back, the others' kept")

		_, rs, _ = e.post(batch)
		require.Equal(t, []string{"replayed Created", "replayed Created", "replayed Unprocessable Entity"}, outcomes(rs))
		require.Equal(t, int64(3), e.runs.Load(), "a resent batch runs nothing again")
		require.Equal(t, []int{1, 1, 0}, []int{e.effects("a"), e.effects("b"), e.effects("c")})
	})
}

// A mutation that does not succeed stops the later mutations of its entity
// in the batch (nothing of them stored), not those of other entities nor
// those without an entity.
func TestBatchSameEntityStop(t *testing.T) {
	eachStore(t, receiver.Options{}, func(t *testing.T, e *batchEnv) {
		batch := []wire.BatchMutation{
			mut("x1", "ok", "X"), mut("x2", "reject", "X"), mut("x3", "ok", "X"), mut("y1", "ok", "Y"), mut("x4", "ok", "X"),
			mut("z1", "reject", ""), mut("z2", "ok", ""),
		}
		_, rs, _ := e.post(batch)
		require.Equal(t, []string{"applied Created", "rejected Unprocessable Entity", "not-attempted ", "applied Created",
			"not-attempted ", "rejected Unprocessable Entity", "applied Created"}, outcomes(rs))
		require.Empty(t, rs[2].Body)
		require.Equal(t, 0, e.effects("x3"))
		require.Equal(t, 1, e.effects("y1"))

		// Resent (its answer lost), the batch is answered as the first time:
		// the replayed rejection still stops its entity.
		_, rs, _ = e.post(batch)
		require.Equal(t, []string{"replayed Created", "replayed Unprocessable Entity", "not-attempted ", "replayed Created",
			"not-attempted ", "replayed Unprocessable Entity", "replayed Created"}, outcomes(rs))
		require.Equal(t, int64(5), e.runs.Load())

		// Not stored: sent again later, x3 runs (it is not replayed).
		_, rs, _ = e.post([]wire.BatchMutation{mut("x3", "ok", "X")})
		require.Equal(t, []string{"applied Created"}, outcomes(rs))
		require.Equal(t, 1, e.effects("x3"))
	})
}

// A mutation's 5xx is rolled back to its savepoint: nothing of it stays,
// it answers retry with the handler's Retry-After, and its entity stops;
// the batch's other mutations commit. Resent, it runs again. A panic in the
// handler is the same for its mutation.
func TestBatchServerErrorRolledBackToSavepoint(t *testing.T) {
	eachStore(t, receiver.Options{}, func(t *testing.T, e *batchEnv) {
		e.failing.Store(true)
		batch := []wire.BatchMutation{mut("f1", "fail", "E"), mut("g1", "ok", "G"), mut("f2", "ok", "E"), mut("p1", "panic", "P"), mut("q1", "ok", "Q")}
		_, rs, _ := e.post(batch)
		require.Equal(t, []string{"retry Service Unavailable", "applied Created", "not-attempted ", "retry Internal Server Error",
			"applied Created"}, outcomes(rs))
		require.Equal(t, 7*time.Second, rs[0].RetryAfter)
		require.Equal(t, "later", string(rs[0].Body))
		require.Equal(t, wire.ProblemInternal, rs[3].Problem)
		require.Equal(t, []int{0, 1, 0, 0, 1}, []int{e.effects("f1"), e.effects("g1"), e.effects("f2"), e.effects("p1"), e.effects("q1")})

		e.failing.Store(false)
		_, rs, _ = e.post(batch[:3])
		require.Equal(t, []string{"applied Created", "replayed Created", "applied Created"}, outcomes(rs))
		require.Equal(t, []int{1, 1, 1}, []int{e.effects("f1"), e.effects("g1"), e.effects("f2")})
	})
}

// A stale fencing token refuses the whole batch as it refuses one request:
// 409 with the highest token, nothing run, nothing stored.
func TestBatchStaleTokenRefusedWhole(t *testing.T) {
	eachStore(t, receiver.Options{}, func(t *testing.T, e *batchEnv) {
		ctx := context.Background()
		tok1, err := e.rc.IssueToken(ctx, "alice", "leader")
		require.NoError(t, err)
		tok2, err := e.rc.IssueToken(ctx, "alice", "leader")
		require.NoError(t, err)
		fence := func(tok uint64) []string {
			return []string{wire.HeaderResource, "leader", wire.HeaderFencingToken, wire.FormatToken(tok)}
		}
		_, rs, _ := e.post([]wire.BatchMutation{mut("n1", "ok", "N")}, fence(tok2)...)
		require.Equal(t, []string{"applied Created"}, outcomes(rs))

		batch := []wire.BatchMutation{mut("s1", "ok", "S"), mut("s2", "ok", "T")}
		resp, _, body := e.post(batch, fence(tok1)...)
		require.Equal(t, 409, resp.StatusCode)
		require.Equal(t, wire.FormatToken(tok2), resp.Header.Get(wire.HeaderFencingHighest))
		require.Equal(t, wire.ProblemStaleToken, problemType(t, body))
		require.Equal(t, int64(1), e.runs.Load())

		resp, _, body = e.post(batch, fence(tok2+5)...)
		require.Equal(t, 400, resp.StatusCode, "a token never issued")
		require.Equal(t, wire.ProblemForgedToken, problemType(t, body))

		_, rs, _ = e.post(batch, fence(tok2)...)
		require.Equal(t, []string{"applied Created", "applied Created"}, outcomes(rs), "nothing of the refused batch was stored")
	})
}

// More mutations than MaxBatch, or a body over MaxBody, get 413 and nothing
// runs; a body that is no batch gets 400; so do the other refusals of a
// single request.
func TestBatchRefusals(t *testing.T) {
	eachStore(t, receiver.Options{MaxBatch: 3, MaxBody: 1024}, func(t *testing.T, e *batchEnv) {
		four := []wire.BatchMutation{mut("a", "ok", ""), mut("b", "ok", ""), mut("c", "ok", ""), mut("d", "ok", "")}
		resp, _, body := e.post(four)
		require.Equal(t, 413, resp.StatusCode)
		require.Equal(t, wire.ProblemBatchTooLarge, problemType(t, body))

		big := mut("e", "ok", "")
		big.Payload = []byte(`"` + string(bytes.Repeat([]byte("x"), 1100)) + `"`)
		resp, _, body = e.post([]wire.BatchMutation{big})
		require.Equal(t, 413, resp.StatusCode)
		require.Equal(t, wire.ProblemBodyTooLarge, problemType(t, body))

		for _, doc := range []string{`not json`, `{"mutations":[{"key":"a b"}]}`, `{"mutations":[{"key":"a"},{"key":"a"}]}`, `{}`} {
			resp, _, body = e.postRaw([]byte(doc), nil)
			require.Equal(t, 400, resp.StatusCode, doc)
			require.Equal(t, wire.ProblemBatchMalformed, problemType(t, body), doc)
		}
		require.Equal(t, int64(0), e.runs.Load())

		resp, _, body = e.post(four[:1], "X-Test-User", "")
		require.Equal(t, 401, resp.StatusCode)
		require.Equal(t, wire.ProblemUnauthenticated, problemType(t, body))
		resp, _, body = e.post(four[:1], wire.HeaderClientUser, "bob")
		require.Equal(t, 403, resp.StatusCode)
		require.Equal(t, wire.ProblemSessionMismatch, problemType(t, body))
		resp, _, _ = e.post(four[:1], wire.HeaderResource, "leader")
		require.Equal(t, 400, resp.StatusCode, "a resource without a token")
		require.Equal(t, int64(0), e.runs.Load())

		_, rs, _ := e.post(four[:3])
		require.Equal(t, []string{"applied Created", "applied Created", "applied Created"}, outcomes(rs), "MaxBatch itself is fine")
	})
}

// A key reused with another payload is rejected (422 key reuse) for that
// mutation only, and its first effect stays as it was.
func TestBatchKeyReuse(t *testing.T) {
	eachStore(t, receiver.Options{}, func(t *testing.T, e *batchEnv) {
		_, rs, _ := e.post([]wire.BatchMutation{mut("k", "ok", "K")})
		require.Equal(t, []string{"applied Created"}, outcomes(rs))
		other := mut("k", "ok", "K")
		other.Payload = []byte(`{"k":"something else"}`)
		_, rs, _ = e.post([]wire.BatchMutation{other, mut("m", "ok", "M")})
		require.Equal(t, []string{"rejected Unprocessable Entity", "applied Created"}, outcomes(rs))
		require.Equal(t, wire.ProblemKeyReuse, rs[0].Problem)
		require.Equal(t, wire.ProblemKeyReuse, problemType(t, rs[0].Body))
		require.Equal(t, 1, e.effects("k"))
		require.Equal(t, int64(2), e.runs.Load())
	})
}

// Copies of one batch sent at once run each mutation once: the others wait
// for the one that runs it and replay its answer.
func TestBatchConcurrentCopiesRunOnce(t *testing.T) {
	eachStore(t, receiver.Options{}, func(t *testing.T, e *batchEnv) {
		batch := []wire.BatchMutation{mut("c1", "ok", "C"), mut("c2", "ok", "C"), mut("d1", "ok", "D")}
		const copies = 8
		type answer struct {
			status int
			rs     []wire.BatchResult
			raw    []byte
			err    error
		}
		answers := make([]answer, copies)
		body := wire.AppendBatchRequest(nil, batch)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, rs, raw, err := e.tryPost(body, keysOf(batch))
				if resp != nil {
					answers[i].status = resp.StatusCode
				}
				answers[i].rs, answers[i].raw, answers[i].err = rs, raw, err
			}()
		}
		wg.Wait()
		applied := make([]int, len(batch))
		for _, a := range answers {
			require.NoError(t, a.err)
			require.Equal(t, 200, a.status, "%s", a.raw)
			for j, r := range a.rs {
				require.Contains(t, []wire.BatchOutcome{wire.BatchApplied, wire.BatchReplayed}, r.Outcome)
				require.Equal(t, 201, r.Status)
				if r.Outcome == wire.BatchApplied {
					applied[j]++
				}
			}
		}
		for j, m := range batch {
			require.Equal(t, 1, e.effects(m.Key), m.Key)
			require.Equal(t, 1, applied[j], m.Key)
		}
		require.Equal(t, int64(len(batch)), e.runs.Load())
	})
}
