package outbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/memstore"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// failNth fails the fail-th transaction.
type failNth struct {
	*memstore.Store
	n, fail int64
}

func (s *failNth) UpdateBatch(ctx context.Context, l queue.Lease, ups []outbox.RecordUpdate) ([]outbox.UpdateResult, error) {
	if atomic.AddInt64(&s.n, 1) == s.fail {
		return nil, errors.New("storage failure")
	}
	return s.Store.UpdateBatch(ctx, l, ups)
}

// A stale token steps the owner down even when writing its records back
// failed, sent alone or in a batch (one rule): the write's error must not
// hide the step-down.
func TestStaleStepsDownWhenItsWriteFails(t *testing.T) {
	for _, batch := range []bool{false, true} {
		h := newHarness(t, func(c *outbox.Config) {
			c.Store = &failNth{Store: c.Store.(*memstore.Store), fail: 2} // 1: charge, 2: the answer's write
			if batch {
				c.BatchEndpoint = "/api/batch"
			}
			c.ChargeAhead = 1
		})
		h.reply = func(outbox.Request) (outbox.Response, error) {
			return outbox.Response{Status: 409, Header: outbox.Header{wire.HeaderFencingHighest: "99"}}, nil
		}
		h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte(`{}`)})
		_, err := h.ob.Flush(t.Context(), h.lease("A"))
		var sd *outbox.StepDownError
		require.ErrorAs(t, err, &sd, "batch=%v", batch)
		require.Equal(t, uint64(99), sd.Highest)
	}
}
