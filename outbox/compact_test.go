package outbox_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/memstore"
	"github.com/tabfence/tabfence/outbox/queue"
)

func TestCompactRemovesOnlyOldAckedRecords(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	st := memstore.New()
	put := func(id string, status queue.Status, ackedAgo time.Duration) {
		r := queue.Record{ID: id, IdempotencyKey: "k-" + id, UserID: "u", EntityType: "note", EntityID: id,
			OperationType: "create", Status: status, CreatedAt: now.Add(-2 * time.Hour)}
		if status == queue.StatusAcked {
			r.AckedAt = now.Add(-ackedAgo)
		}
		st.Seed(r)
	}
	put("old-acked", queue.StatusAcked, 2*time.Hour)
	put("new-acked", queue.StatusAcked, time.Minute)
	put("pending", queue.StatusPending, 0)
	put("dead", queue.StatusDeadLetter, 0)
	put("conflict", queue.StatusConflict, 0)

	o := newCompactOutbox(t, st, now)
	n, err := o.Compact(ctx, time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("Compact = %d, %v; want 1 record removed", n, err)
	}
	left, _ := st.List(ctx, outbox.Filter{})
	var ids []string
	for _, r := range left {
		ids = append(ids, r.ID)
	}
	for _, want := range []string{"new-acked", "pending", "dead", "conflict"} {
		if !slices.Contains(ids, want) {
			t.Errorf("%s was removed; left %v", want, ids)
		}
	}
	if slices.Contains(ids, "old-acked") {
		t.Errorf("old acked record kept")
	}
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

func newCompactOutbox(t *testing.T, st outbox.Store, now time.Time) *outbox.Outbox {
	t.Helper()
	o, err := outbox.New(outbox.Config{Name: "q", Store: st, Clock: fixedClock(now),
		Transport: outbox.TransportFunc(func(context.Context, outbox.Request) (outbox.Response, error) {
			return outbox.Response{Status: 200}, nil
		}),
		Policies: map[string]queue.Policy{"create": {Dedupe: queue.Append}}})
	require.NoError(t, err)
	return o
}
