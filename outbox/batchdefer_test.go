package outbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/memstore"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// Concurrency 2, two entities, one page each: e0's page is answered at
// once, e1's is held. e0's records are acked while e1's page is still in
// flight (no charge follows to carry their acks), not when it ends.
func TestBatchAcksNotHeldBySlowPage(t *testing.T) {
	h, fr := batchHarness(t, func(c *outbox.Config) { c.Concurrency = 2; c.BatchMax = 5 })
	ids := enqueueEntities(h, 2, 5)
	release := make(chan struct{})
	fr.whole = func(_ int, ms []wire.BatchMutation) (outbox.Response, bool) {
		if ms[0].Entity == "note:e1" {
			<-release
		}
		return outbox.Response{}, false
	}
	done := make(chan struct{})
	go func() { _, _ = h.ob.Flush(t.Context(), h.lease("A")); close(done) }()
	defer func() { <-done }()
	defer close(release)
	require.Eventually(t, func() bool {
		for _, id := range ids["note:e0"] {
			if h.get(id).Status != queue.StatusAcked {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "e0's acks wait for e1's page")
	require.Equal(t, queue.StatusSending, h.get(ids["note:e1"][0]).Status)
}

// failFirstWith fails the first transaction that touches id.
type failFirstWith struct {
	*memstore.Store
	mu     sync.Mutex
	id     string
	failed bool
}

func (s *failFirstWith) UpdateBatch(ctx context.Context, l queue.Lease, ups []outbox.RecordUpdate) ([]outbox.UpdateResult, error) {
	s.mu.Lock()
	for _, u := range ups {
		if u.ID == s.id && !s.failed {
			s.failed = true
			s.mu.Unlock()
			return nil, errors.New("storage failure")
		}
	}
	s.mu.Unlock()
	return s.Store.UpdateBatch(ctx, l, ups)
}

// A record at its last attempt that the receiver applied is acked in its
// own transaction, not with the next page's charge: that charge failing
// (as a tab closing would leave it) must not leave it in flight, charged,
// to be recovered as a dead letter.
func TestBatchLastAttemptAckNotDeferred(t *testing.T) {
	var fs *failFirstWith
	h, fr := batchHarness(t, func(c *outbox.Config) {
		fs = &failFirstWith{Store: c.Store.(*memstore.Store)}
		c.Store = fs
		c.BatchMax = 1
		c.MaxAttempts = 1
	})
	ids := enqueueEntities(h, 2, 1)
	fs.id = ids["note:e1"][0] // the second page's charge fails
	_, err := h.ob.Flush(t.Context(), h.lease("A"))
	require.Error(t, err)
	h.clock.Add(time.Hour) // any lease left behind expires
	drain(t, h)
	requireAllAckedOnce(t, h, fr, ids)
}
