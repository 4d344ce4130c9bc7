package outbox_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/memstore"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// requireAllAckedOnce checks that every record is acked and the receiver
// ran each key once, in each entity's enqueue order.
func requireAllAckedOnce(t *testing.T, h *harness, fr *fakeReceiver, ids map[string][]string) {
	t.Helper()
	total := 0
	for ent, want := range ids {
		for _, id := range want {
			require.Equal(t, queue.StatusAcked, h.get(id).Status, id)
		}
		var got []string
		for _, id := range fr.order {
			if contains(want, id) {
				got = append(got, id)
			}
		}
		require.Equal(t, want, got, "entity %s applied out of order", ent)
		total += len(want)
	}
	require.Len(t, fr.effects, total)
	for k, n := range fr.effects {
		require.Equal(t, 1, n, k)
	}
}

func TestBatchFlushHappyPath(t *testing.T) {
	for _, conc := range []int{1, 4} {
		t.Run("concurrency"+string(rune('0'+conc)), func(t *testing.T) {
			h, fr := batchHarness(t, func(c *outbox.Config) { c.Concurrency = conc })
			if conc > 1 {
				// Hold the requests until three are in flight: the
				// three pages go out together.
				var mu sync.Mutex
				cond := sync.NewCond(&mu)
				n := 0
				fr.gate = func() {
					mu.Lock()
					n++
					cond.Broadcast()
					for n < 3 {
						cond.Wait()
					}
					mu.Unlock()
				}
			}
			ids := enqueueEntities(h, 5, 50)
			rep := drain(t, h)
			require.ElementsMatch(t, []int{100, 100, 50}, fr.sizes())
			require.Equal(t, 3, rep.Requests)
			require.Equal(t, 250, rep.Acked)
			require.False(t, fr.overlap, "an entity was in two requests at once")
			require.Empty(t, fr.singles)
			requireAllAckedOnce(t, h, fr, ids)
			r := h.get(ids["note:e0"][0])
			require.Equal(t, 1, r.Attempts)
			require.Equal(t, 201, r.Response.Status)
			require.Equal(t, `{"ok":true}`, string(r.Response.Body))
		})
	}
}

// A lane longer than a page is cut, and its rest goes in a later page,
// in order, after the first part's results.
func TestBatchFlushEntityOrderAcrossPages(t *testing.T) {
	for _, conc := range []int{1, 4} {
		h, fr := batchHarness(t, func(c *outbox.Config) { c.Concurrency = conc; c.BatchMax = 30 })
		ids := enqueueEntities(h, 2, 70)
		rep := drain(t, h)
		require.Equal(t, 140, rep.Acked)
		require.False(t, fr.overlap)
		requireAllAckedOnce(t, h, fr, ids)
		for _, n := range fr.sizes() {
			require.LessOrEqual(t, n, 30)
		}
	}
}

func TestBatchFlushRequestsCountedWithoutBatching(t *testing.T) {
	h := newHarness(t, nil)
	for i := 0; i < 3; i++ {
		h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte("p")})
	}
	rep, err := h.ob.Flush(context.Background(), h.lease("A"))
	require.NoError(t, err)
	require.Equal(t, 3, rep.Requests)
	require.Len(t, h.sent(), 3)
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// countingStore counts the flush's record transactions.
type countingStore struct {
	*memstore.Store
	updates atomic.Int64
}

func (s *countingStore) UpdateBatch(ctx context.Context, l queue.Lease, ups []outbox.RecordUpdate) ([]outbox.UpdateResult, error) {
	s.updates.Add(1)
	return s.Store.UpdateBatch(ctx, l, ups)
}

// A page costs one charge transaction, and the acks of a clean page ride
// with the next page's charge of the same claim: 3 pages, 4 transactions
// (not 6).
func TestBatchFlushTransactionsPerPage(t *testing.T) {
	var cs *countingStore
	h, fr := batchHarness(t, func(c *outbox.Config) {
		cs = &countingStore{Store: c.Store.(*memstore.Store)}
		c.Store = cs
		c.BatchSize = 250 // one claim
	})
	ids := enqueueEntities(h, 5, 50)
	rep := drain(t, h)
	require.Equal(t, 3, rep.Requests)
	require.Equal(t, int64(4), cs.updates.Load())
	requireAllAckedOnce(t, h, fr, ids)
}

// A lane cut across pages stops at its first record that is not acked:
// its rest is not sent in a later page of the same flush.
func TestBatchFailureStopsLaneAcrossPages(t *testing.T) {
	for _, conc := range []int{1, 4} {
		h, fr := batchHarness(t, func(c *outbox.Config) { c.BatchMax = 3; c.Concurrency = conc })
		ids := enqueueEntities(h, 1, 6)
		a := ids["note:e0"]
		bad := keyOf(h, a[1])
		fr.handle = func(m wire.BatchMutation) wire.BatchResult {
			if m.Key == bad {
				return wire.BatchResult{Status: 500}
			}
			return wire.BatchResult{}
		}
		rep := drain(t, h)
		require.Equal(t, 1, rep.Requests)
		require.Equal(t, []string{a[0]}, fr.order)
		require.Equal(t, queue.StatusFailed, h.get(a[1]).Status)
		for _, id := range a[2:] {
			require.Equal(t, queue.StatusPending, h.get(id).Status)
			require.Equal(t, 0, h.get(id).Attempts)
		}
	}
}

// A rejected result whose problem type says the key is in flight elsewhere
// is retried, as the single answer would be, even with the problem only in
// the result's problem member.
func TestBatchRejectedInFlightProblemRetried(t *testing.T) {
	h, fr := batchHarness(t, nil)
	ids := enqueueEntities(h, 1, 1)
	fr.whole = func(_ int, ms []wire.BatchMutation) (outbox.Response, bool) {
		rs := []wire.BatchResult{{Key: ms[0].Key, Outcome: wire.BatchRejected, Status: 409, Problem: wire.ProblemInFlight}}
		return outbox.Response{Status: 200, Body: wire.AppendBatchResponse(nil, rs)}, true
	}
	drain(t, h)
	r := h.get(ids["note:e0"][0])
	require.Equal(t, queue.StatusFailed, r.Status)
	require.Equal(t, 1, r.Attempts)
}
