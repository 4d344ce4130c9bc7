package outbox_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/memstore"
)

func TestCompactRemovesOnlyOldAckedRecords(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	st := memstore.New()
	put := func(id string, status outbox.Status, ackedAgo time.Duration) {
		r := outbox.Record{ID: id, IdempotencyKey: "k-" + id, UserID: "u", EntityType: "note", EntityID: id,
			OperationType: "create", Status: status, CreatedAt: now.Add(-2 * time.Hour)}
		if status == outbox.StatusAcked {
			r.AckedAt = now.Add(-ackedAgo)
		}
		st.Seed(r)
	}
	put("old-acked", outbox.StatusAcked, 2*time.Hour)
	put("new-acked", outbox.StatusAcked, time.Minute)
	put("pending", outbox.StatusPending, 0)
	put("dead", outbox.StatusDeadLetter, 0)
	put("conflict", outbox.StatusConflict, 0)

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
		Policies: map[string]outbox.Policy{"create": {Dedupe: outbox.Append}}})
	require.NoError(t, err)
	return o
}
