package outbox

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCompactRemovesOnlyOldAckedRecords(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	st := NewMemStore()
	put := func(id string, status Status, ackedAgo time.Duration) {
		r := Record{ID: id, IdempotencyKey: "k-" + id, UserID: "u", EntityType: "note", EntityID: id,
			OperationType: "create", Status: status, CreatedAt: now.Add(-2 * time.Hour)}
		if status == StatusAcked {
			r.AckedAt = now.Add(-ackedAgo)
		}
		st.mu.Lock()
		r.Seq = uint64(len(st.recs) + 1)
		st.recs[id] = r
		st.mu.Unlock()
	}
	put("old-acked", StatusAcked, 2*time.Hour)
	put("new-acked", StatusAcked, time.Minute)
	put("pending", StatusPending, 0)
	put("dead", StatusDeadLetter, 0)
	put("conflict", StatusConflict, 0)

	o := newCompactOutbox(t, st, now)
	n, err := o.Compact(ctx, time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("Compact = %d, %v; want 1 record removed", n, err)
	}
	left, _ := st.List(ctx, Filter{})
	var ids []string
	for _, r := range left {
		ids = append(ids, r.ID)
	}
	for _, want := range []string{"new-acked", "pending", "dead", "conflict"} {
		if !contains(ids, want) {
			t.Errorf("%s was removed; left %v", want, ids)
		}
	}
	if contains(ids, "old-acked") {
		t.Errorf("old acked record kept")
	}
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

func newCompactOutbox(t *testing.T, st Store, now time.Time) *Outbox {
	t.Helper()
	o, err := New(Config{Name: "q", Store: st, Clock: fixedClock(now),
		Transport: TransportFunc(func(context.Context, Request) (Response, error) { return Response{Status: 200}, nil }),
		Policies:  map[string]Policy{"create": {Dedupe: Append}}})
	require.NoError(t, err)
	return o
}
