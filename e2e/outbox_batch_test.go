//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
	"github.com/tabfence/tabfence/wire"
)

// The outbox with the demo's batch route (batch=1: POST /api/notes/batch,
// the receiver's HandleBatch): real tabs, the real server in-process. A
// middleware in front of the batch route observes every batch and its
// results, and can hold one answer after the server committed it.

// batchCtl observes POST /api/notes/batch.
type batchCtl struct {
	mu       sync.Mutex
	requests int
	sizes    []int                          // mutations per request, in arrival order
	outcomes map[string][]wire.BatchOutcome // per key, in the order answered
	inflight int
	holdNext bool          // buffer the next answer after the commit and hold it
	held     []string      // the keys the held answer applied
	done     chan struct{} // closed when the held request committed
	release  chan struct{} // close to send the held answer
}

func newBatchCtl() *batchCtl { return &batchCtl{outcomes: map[string][]wire.BatchOutcome{}} }

func (c *batchCtl) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/notes/batch" {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		ms, _ := wire.ParseBatchRequest(body, 1<<20)
		keys := make([]string, len(ms))
		for i, m := range ms {
			keys[i] = m.Key
		}
		c.mu.Lock()
		c.requests++
		c.sizes = append(c.sizes, len(ms))
		c.inflight++
		hold := c.holdNext
		c.holdNext = false
		done, release := c.done, c.release
		c.mu.Unlock()
		defer func() { c.mu.Lock(); c.inflight--; c.mu.Unlock() }()
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		rs, err := wire.ParseBatchResponse(rec.Body.Bytes(), keys)
		c.mu.Lock()
		if err == nil {
			for _, res := range rs {
				c.outcomes[res.Key] = append(c.outcomes[res.Key], res.Outcome)
				if hold && res.Outcome == wire.BatchApplied {
					c.held = append(c.held, res.Key)
				}
			}
		}
		c.mu.Unlock()
		if hold {
			close(done)
			select {
			case <-release:
			case <-r.Context().Done():
				return // the tab went away: the answer is lost
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

func (c *batchCtl) set(fn func(c *batchCtl)) {
	c.mu.Lock()
	fn(c)
	c.mu.Unlock()
}

// waitIdle waits until the batch route has answered every request.
func (c *batchCtl) waitIdle(t *testing.T) {
	t.Helper()
	require.NoError(t, harness.Poll(context.Background(), "no batch in flight", 10*time.Second, 5*time.Millisecond, func() (bool, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.inflight == 0, nil
	}))
}

// applied counts the keys answered applied, and the most times one was.
func (c *batchCtl) applied() (keys, most int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, os := range c.outcomes {
		n := 0
		for _, o := range os {
			if o == wire.BatchApplied {
				n++
			}
		}
		if n > 0 {
			keys++
		}
		most = max(most, n)
	}
	return keys, most
}

// enqueueSpread adds n notes from the tab in `entities` entities (e0..),
// ids prefix-0..n-1, a few hundred enqueues per evaluation, 50 at once.
func enqueueSpread(t *testing.T, tab *harness.Tab, prefix string, n, entities int) {
	t.Helper()
	for from := 0; from < n; from += 250 {
		eval[bool](t, tab, `(async (from, to, entities) => {
			for (let i = from; i < to; i += 50) {
				const ps = [];
				for (let j = i; j < Math.min(i + 50, to); j++) {
					const id = "`+prefix+`-" + j;
					ps.push(tabfenceNotes.outbox.enqueue({operationType: "put-note", entityType: "note", entityId: "e" + (j % entities), payload: {id, text: "text " + j}}));
				}
				await Promise.all(ps);
			}
			return true; })(`+strconv.Itoa(from)+`, `+strconv.Itoa(min(from+250, n))+`, `+strconv.Itoa(entities)+`)`)
	}
}

// exactlyOnce asserts that the server stored n notes of user, each changed
// by exactly one effect (every note's id is its own mutation's).
func (e *obEnv) exactlyOnce(user string, n int) {
	e.t.Helper()
	notes := e.notesOf(user)
	require.Len(e.t, notes, n, "notes stored")
	for _, note := range notes {
		require.EqualValues(e.t, 1, note.Effects, "note %s changed %d times", note.ID, note.Effects)
	}
	require.Equal(e.t, n, e.effects(), "effects counted")
}

// 2,000 mutations queued offline in 50 entities, then online: the server
// counts exactly 2,000 effects, in batches (about 2,000/100 requests), and
// nothing goes one by one.
func TestOutboxBatch2000Offline(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		bc := newBatchCtl()
		e := setupOutboxMW(t, k, harness.Options{}, bc.middleware)
		tab := e.tab(scope(t), "alice", url.Values{"batch": {"1"}})
		offline(t, tab, true)
		const n = 2000
		enqueueSpread(t, tab, "b", n, 50)
		st := waitStatus(t, tab, "no send in progress", 10*time.Second, func(s obStatus) bool { return s.Sending == 0 })
		require.Equal(t, n, st.Pending, "offline: %+v", st)
		require.Equal(t, 0, e.effects(), "offline: %+v", st)
		start := time.Now()
		offline(t, tab, false)
		e.waitEffects(n, 90*time.Second)
		took := time.Since(start)
		waitStatus(t, tab, "2000 acked", 20*time.Second, func(s obStatus) bool { return s.Acked == n && s.Pending+s.Sending+s.Failed == 0 })
		bc.waitIdle(t)
		e.waitIdle()
		e.exactlyOnce("alice", n)
		keys, most := bc.applied()
		require.Equal(t, n, keys, "keys applied through the batch route")
		require.Equal(t, 1, most, "a key applied twice")
		single, _ := e.ctl.keys()
		require.Equal(t, 0, single, "records sent one by one beside the batches")
		bc.mu.Lock()
		reqs, sizes := bc.requests, slices.Clone(bc.sizes)
		bc.mu.Unlock()
		require.LessOrEqual(t, slices.Max(sizes), 100, "a batch above batch.max's default (sizes %v)", sizes)
		require.LessOrEqual(t, reqs, 60, "%d batch requests for %d mutations: not batching (sizes %v)", reqs, n, sizes)
		t.Logf("%d offline mutations in 50 entities delivered in %v after going online, in %d batch requests (sizes %v)", n, took, reqs, sizes)
	})
}

// The flushing tab is closed after the server committed a batch but before
// the answer reached it: another tab takes over, resends the batch's
// records under their own keys, gets them replayed: every mutation has
// exactly one effect.
func TestOutboxBatchResponseLost(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		bc := newBatchCtl()
		e := setupOutboxMW(t, k, harness.Options{}, bc.middleware)
		q := scope(t)
		extra := url.Values{"batch": {"1"}}
		tabs := []*harness.Tab{e.tab(q, "alice", extra), e.tab(q, "alice", extra), e.tab(q, "alice", extra)}
		for _, tab := range tabs {
			offline(t, tab, true)
		}
		const n = 300
		enqueueSpread(t, tabs[1], "n", n, 10)
		done, release := make(chan struct{}), make(chan struct{})
		defer close(release)
		bc.set(func(c *batchCtl) { c.holdNext, c.done, c.release = true, done, release })
		for _, tab := range tabs {
			offline(t, tab, false)
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("no batch reached the server")
		}
		owner := leaderOf(t, tabs)
		bc.mu.Lock()
		held := slices.Clone(bc.held)
		bc.mu.Unlock()
		require.NotEmpty(t, held, "the held batch applied nothing")
		require.GreaterOrEqual(t, e.effects(), len(held), "the held batch's effects are committed before the close")
		start := time.Now()
		tabs[owner].Close()
		e.waitEffects(n, 60*time.Second)
		took := time.Since(start)
		other := tabs[(owner+1)%3]
		waitStatus(t, other, "300 acked", 20*time.Second, func(s obStatus) bool { return s.Acked == n && s.Pending+s.Sending+s.Failed == 0 })
		bc.waitIdle(t)
		e.waitIdle()
		e.exactlyOnce("alice", n)
		keys, most := bc.applied()
		require.Equal(t, n, keys, "keys applied through the batch route")
		require.Equal(t, 1, most, "a key applied twice")
		bc.mu.Lock()
		defer bc.mu.Unlock()
		for _, k := range held {
			require.Contains(t, bc.outcomes[k], wire.BatchReplayed, "the lost answer's key %s was not resent and replayed (%v)", k, bc.outcomes[k])
		}
		t.Logf("owner closed with a committed batch of %d unanswered: the queue finished %v later, exactly once (%d batch requests)", len(held), took, bc.requests)
	})
}

// The Service Worker opens the queue with the pages' options, the batch
// endpoint among them (the demo's worker takes batch from its script URL):
// with every tab closed, its drain sends the queue in batches, each
// mutation once.
func TestSWDrainsInBatches(t *testing.T) {
	chromiumOnly(t, "dispatches sync to the Service Worker and reads its reports (CDP ServiceWorker domain)", func(t *testing.T, k harness.Kind) {
		_, bc, rep := swBatchDrain(t, k)
		bc.mu.Lock()
		defer bc.mu.Unlock()
		t.Logf("the worker drained in %d batch requests (sizes %v), report %+v", bc.requests, bc.sizes, rep)
	})
}

// The drain's report counts its requests (SyncReport.requests), as the
// server saw them.
func TestSWDrainReportCountsRequests(t *testing.T) {
	chromiumOnly(t, "dispatches sync to the Service Worker and reads its reports (CDP ServiceWorker domain)", func(t *testing.T, k harness.Kind) {
		_, bc, rep := swBatchDrain(t, k)
		bc.mu.Lock()
		defer bc.mu.Unlock()
		require.Equal(t, bc.requests, rep.Requests, "the report's requests against the server's count (report %+v)", rep)
	})
}

// swBatchDrain queues 250 mutations offline in 5 entities in a tab with
// batch=1, closes it, dispatches the sync event and checks that the worker
// sent each once, in batches; it returns the worker's report.
func swBatchDrain(t *testing.T, k harness.Kind) (*swEnv, *batchCtl, harness.SyncReport) {
	bc := newBatchCtl()
	e := setupSWMW(t, k, bc.middleware)
	q := scope(t)
	tab := e.swTab(q, "alice", url.Values{"bgsync": {"0"}, "batch": {"1"}})
	e.active(1)
	offline(t, tab, true)
	const n = 250
	enqueueSpread(t, tab, "w", n, 5)
	tag := syncTag(t, tab)
	tab.Close()
	require.Equal(t, 0, e.effects(), "sent while offline")
	e.dispatch(tag, false)
	e.waitEffects(n, swTimeout)
	rep := e.waitReport(tag, 1)
	require.Equal(t, "done", rep.Reason, "report %+v", rep)
	require.Equal(t, n, rep.Acked, "report %+v", rep)
	bc.waitIdle(t)
	e.waitIdle()
	e.exactlyOnce("alice", n)
	keys, most := bc.applied()
	require.Equal(t, n, keys, "keys applied through the batch route")
	require.Equal(t, 1, most, "a key applied twice")
	single, _ := e.ctl.keys()
	require.Equal(t, 0, single, "records the worker sent one by one")
	bc.mu.Lock()
	defer bc.mu.Unlock()
	require.LessOrEqual(t, bc.requests, 10, "%d batch requests for %d mutations (sizes %v)", bc.requests, n, bc.sizes)
	return e, bc, rep
}
