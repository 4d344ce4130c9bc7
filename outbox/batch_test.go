package outbox_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
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
		require.Equal(t, want, fr.applied[ent], "entity %s applied out of order", ent)
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
