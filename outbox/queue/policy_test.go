package queue_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox/queue"
)

// The policy table is the one list of dedupe policies: every row plans an
// enqueue, and what reads the queue or needs Merge follows from its row.
func TestDedupePolicyTable(t *testing.T) {
	require.Equal(t, []queue.Dedupe{queue.Append, queue.ReplaceLatest, queue.Merge, queue.DropIfExists}, queue.DedupePolicies())
	require.False(t, queue.Dedupe("replace").Known())
	keep := func(older, newer []byte) ([]byte, error) { return newer, nil }
	for _, d := range queue.DedupePolicies() {
		require.True(t, d.Known(), d)
		require.Equal(t, d == queue.Merge, d.Merges(), d)
		pol := queue.Policy{Dedupe: d, Merge: keep}
		require.Equal(t, d != queue.Append, pol.ReadsQueue("k"), d)
		require.Equal(t, d == queue.ReplaceLatest || d == queue.Merge, pol.ReadsEntity("k"), d)
		require.False(t, pol.ReadsEntity(""), d)
		plan, err := queue.PlanEnqueue(nil, queue.EnqueueRequest{Record: queue.Record{ID: "a", IdempotencyKey: "a", UserID: "u", OperationKey: "k"}, Policy: pol}, t0)
		require.NoError(t, err, d)
		require.Equal(t, queue.ActionAppended, plan.Result.Action, d)
	}
	_, err := queue.PlanEnqueue(nil, queue.EnqueueRequest{Record: queue.Record{ID: "a", IdempotencyKey: "a", UserID: "u"}, Policy: queue.Policy{Dedupe: "replace"}}, t0)
	require.ErrorIs(t, err, queue.ErrUnknownOperation)
}
