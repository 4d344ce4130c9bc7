//go:build js && wasm

package idbstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/outbox/storetest"
)

// An UpdateBatch writes what its Fns left: a record whose payload a Fn
// changed is stored with the new bytes, one whose payload it left keeps
// the stored bytes, both with their new state.
func TestIDBUpdateBatchPayload(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t)
	enq(t, s, storetest.NewRecord("a", "alice", "comment", "", "n1", []byte(`{"v":"a"}`)), 0)
	enq(t, s, storetest.NewRecord("b", "alice", "comment", "", "n2", []byte(`{"v":"b"}`)), 0)
	l, err := s.UpdateLease(ctx, "flush", queue.AcquireLease("tab1", storetest.T0, time.Minute, true))
	require.NoError(t, err)
	charge := func(payload []byte) func(r *queue.Record) error {
		return func(r *queue.Record) error {
			n, err := queue.Charge(*r, l, storetest.T0, time.Minute, time.Time{})
			if payload != nil {
				n.Payload = payload
			}
			*r = n
			return err
		}
	}
	res, err := s.UpdateBatch(ctx, l, []outbox.RecordUpdate{
		{ID: "a", Take: true, Fn: charge([]byte(`{"v":"new"}`))},
		{ID: "b", Take: true, Fn: charge(nil)},
	})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	for id, want := range map[string]string{"a": `{"v":"new"}`, "b": `{"v":"b"}`} {
		g, err := s.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, string(g.Payload), "payload of %s", id)
		require.Equal(t, queue.StatusSending, g.Status, "status of %s", id)
	}
}
