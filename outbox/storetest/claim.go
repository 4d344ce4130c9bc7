package storetest

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

func testClaimStale(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	ghost := queue.Lease{Name: "flush", Owner: "tab1", Token: 1}
	if _, err := s.Claim(bg, queue.ClaimRequest{Lease: ghost, Now: T0, Limit: 5, LeaseTTL: time.Second, UserID: "alice", TenantID: "t1"}); !errors.Is(err, queue.ErrStaleOwner) {
		t.Fatalf("claim without a lease row: %v", err)
	}
	l1 := acquire(t, s, "tab1", T0, true)
	acquire(t, s, "tab2", T0, true)
	if _, err := s.Claim(bg, queue.ClaimRequest{Lease: l1, Now: T0, Limit: 5, LeaseTTL: time.Second, UserID: "alice", TenantID: "t1"}); !errors.Is(err, queue.ErrStaleOwner) {
		t.Fatalf("claim with a stale lease: %v", err)
	}
	if g := get(t, s, "a"); g.Status != queue.StatusPending || g.LeaseOwner != "" {
		t.Fatalf("stale claim changed the record: %+v", g)
	}
}

func testClaimBatch(t *testing.T, s outbox.Store) {
	for i, e := range []string{"n1", "n2", "n1", "n3", "n2"} {
		enqueue(t, s, NewRecord("r"+strconv.Itoa(i), "alice", "comment", "", e, nil), 0)
	}
	enqueue(t, s, NewRecord("bob1", "bob", "comment", "", "n1", nil), 0)
	l := acquire(t, s, "tab1", T0, true)
	// A claim plans and writes nothing: the records stay waiting, as stored.
	planned, err := s.Claim(bg, queue.ClaimRequest{Lease: l, Now: T0, Limit: 3, LeaseTTL: 30 * time.Second, UserID: "alice", TenantID: "t1", Schema: queue.SchemaGate{Version: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range planned {
		g := get(t, s, r.ID)
		same(t, r, g)
		if g.Status != queue.StatusPending || g.LeaseOwner != "" {
			t.Fatalf("a claim wrote %+v", g)
		}
	}
	// Only a Take update may change a record the lease does not hold yet.
	if _, err := Update(s, l, "r0", updateFn(func(r queue.Record) (queue.Record, error) { return queue.Claim(r, l, T0, time.Minute) })); !errors.Is(err, queue.ErrStaleOwner) {
		t.Fatalf("a plain update of a waiting record: %v", err)
	}
	got := claim(t, s, l, "alice", T0, 3)
	// Lanes by head seq: n1 (r0, r2), n2 (r1) — at most 3 records.
	if ids(got) != "r0,r2,r1" || ids(planned) != ids(got) {
		t.Fatalf("claimed %s, planned %s", ids(got), ids(planned))
	}
	for _, r := range got {
		g := get(t, s, r.ID)
		same(t, r, g)
		if g.Status != queue.StatusLeased || g.LeaseOwner != "tab1" || g.LeaseToken != l.Token || !g.LeaseExpiresAt.Equal(T0.Add(30*time.Second)) {
			t.Fatalf("stored %+v", g)
		}
	}
	if g := get(t, s, "r3"); g.Status != queue.StatusPending {
		t.Fatalf("unclaimed record changed: %+v", g)
	}
	if g := get(t, s, "bob1"); g.Status != queue.StatusPending {
		t.Fatal("another user's record was claimed")
	}
	// The next claim continues with what is left and due.
	if got := claim(t, s, l, "alice", T0, 10); ids(got) != "r3" {
		t.Fatalf("second claim %s (n2's r4 waits behind leased r1)", ids(got))
	}
	// A take refuses what is not waiting (leased by this lease already) and
	// writes nothing for it; the batch's other takes go ahead.
	res, err := s.UpdateBatch(bg, l, []outbox.RecordUpdate{
		{ID: "r0", Take: true, Fn: updateFn(func(r queue.Record) (queue.Record, error) { return queue.Charge(r, l, T0, time.Minute, time.Time{}) })},
		{ID: "r4", Take: true, Fn: updateFn(func(r queue.Record) (queue.Record, error) { return queue.Charge(r, l, T0, time.Minute, time.Time{}) })},
	})
	if err != nil || !errors.Is(res[0].Err, queue.ErrInvalidTransition) || res[1].Err != nil {
		t.Fatalf("takes: %v %+v", err, res)
	}
	if g := get(t, s, "r0"); g.Status != queue.StatusLeased || g.Attempts != 0 {
		t.Fatalf("a refused take changed %+v", g)
	}
	if g := get(t, s, "r4"); g.Status != queue.StatusSending || g.Attempts != 1 || g.Sends != 1 || g.LeaseOwner != "tab1" || g.LeaseToken != l.Token {
		t.Fatalf("charged %+v", g)
	}
	// A take must lease the record to the batch's lease.
	res, err = s.UpdateBatch(bg, l, []outbox.RecordUpdate{{ID: "bob1", Take: true, Fn: func(r *queue.Record) error { r.Attempts = 7; return nil }}})
	if err != nil || !errors.Is(res[0].Err, queue.ErrInvalidRecord) {
		t.Fatalf("a take that does not lease: %v %+v", err, res)
	}
	if g := get(t, s, "bob1"); g.Status != queue.StatusPending || g.Attempts != 0 {
		t.Fatalf("a refused take changed %+v", g)
	}
}

func testClaimRecover(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	l1 := acquire(t, s, "tab1", T0, true)
	claim(t, s, l1, "alice", T0, 10)
	transition(t, s, l1, "a", func(r queue.Record) (queue.Record, error) { return queue.MarkSending(r, l1, T0) })
	later := T0.Add(time.Minute)
	l2 := acquire(t, s, "tab2", later, true)
	got := claim(t, s, l2, "alice", later, 10)
	if ids(got) != "a" || got[0].LeaseOwner != "tab2" || got[0].Attempts != 1 || got[0].LastError == nil || got[0].LastError.Code != "lease_expired" {
		t.Fatalf("claimed %+v", got)
	}
	same(t, got[0], get(t, s, "a"))
}

func testNewerSchema(t *testing.T, s outbox.Store) {
	r := NewRecord("future", "alice", "comment", "", "n1", []byte("v9 payload"))
	r.PayloadSchemaVersion = 9
	r.DependencyIDs = []string{"x", "y"}
	stored := enqueue(t, s, r, 0).Record
	l := acquire(t, s, "tab1", T0, true)
	if got := claim(t, s, l, "alice", T0, 10); len(got) != 0 {
		t.Fatalf("a newer schema was claimed: %s", ids(got))
	}
	same(t, stored, get(t, s, "future"))
	if rs := list(t, s, outbox.Filter{MinSchemaVersion: 2}); ids(rs) != "future" {
		t.Fatalf("listed %s", ids(rs))
	}
}

// testClaimLongQueue drains a long, mixed queue batch by batch. Every claim
// must pick exactly what PlanClaim picks over the whole queue (a store may
// read less of it, e.g. a prefix in seq order, but never decide otherwise):
// two users, entities blocked by a conflict, by a backoff and by an
// in-flight record whose lease expired, dependencies on records far behind
// and far ahead, on acked and on absent records, and records of a newer
// schema.
func testClaimLongQueue(t *testing.T, s outbox.Store) {
	const n = 90
	id := func(i int) string { return "q" + strconv.Itoa(100+i) }
	for i := 0; i < n; i++ {
		user := "alice"
		if i%7 == 3 {
			user = "bob"
		}
		r := NewRecord(id(i), user, "comment", "", "e"+strconv.Itoa(i%11), nil)
		switch {
		case i%13 == 5:
			r.DependencyIDs = []string{id(i + 40)} // far ahead (or absent past the end)
		case i%17 == 9:
			r.DependencyIDs = []string{id(i - 30), "absent"}
		}
		if i%23 == 22 {
			r.PayloadSchemaVersion = 2
		}
		enqueue(t, s, r, 0)
	}
	old := acquire(t, s, "dead", T0, true)
	for _, r := range claim(t, s, old, "alice", T0, 3) { // an owner that dies mid-send
		transition(t, s, old, r.ID, func(r queue.Record) (queue.Record, error) { return queue.MarkSending(r, old, T0) })
	}
	if got, err := s.Claim(bg, queue.ClaimRequest{Lease: old, Now: T0, Limit: 2, LeaseTTL: 30 * time.Second, UserID: "alice", TenantID: "t1", Schema: queue.SchemaGate{Version: 1}}); err != nil || len(got) != 2 {
		t.Fatalf("a plan whose records are never taken: %v %s", err, ids(got)) // and that stays harmless
	}
	l := acquire(t, s, "tab", T0.Add(time.Second), true)
	now := T0.Add(time.Minute) // past the dead owner's lease
	batch := 0
	for ; batch < 100; batch++ {
		var live []queue.Record
		for _, r := range list(t, s, outbox.Filter{}) {
			if r.Status != queue.StatusAcked {
				live = append(live, r)
			}
		}
		req := queue.ClaimRequest{Lease: l, Now: now, Limit: 7, LeaseTTL: 30 * time.Second, UserID: "alice", TenantID: "t1", Schema: queue.SchemaGate{Version: 1}}
		want := queue.PlanClaim(live, req)
		got, err := s.Claim(bg, req)
		require.NoError(t, err, "claim %d", batch)
		if ids(got) != ids(want.Claimed) {
			t.Fatalf("claim %d: got %s, PlanClaim over the whole queue %s", batch, ids(got), ids(want.Claimed))
		}
		if len(got) == 0 {
			break
		}
		got = take(t, s, l, now, got, func(r queue.Record) (queue.Record, error) {
			return queue.Charge(r, l, now, 30*time.Second, time.Time{})
		})
		for i, r := range got {
			switch {
			case batch == 1 && i == 0:
				transition(t, s, l, r.ID, func(r queue.Record) (queue.Record, error) {
					return queue.MarkConflict(r, l, now, queue.ErrorInfo{Code: "http_409"})
				})
			case batch == 2 && i == 1:
				transition(t, s, l, r.ID, func(r queue.Record) (queue.Record, error) {
					return queue.Retry(r, l, now, now.Add(time.Hour), queue.ErrorInfo{Code: "http_503"})
				})
			default:
				transition(t, s, l, r.ID, func(r queue.Record) (queue.Record, error) {
					return queue.Ack(r, l, now, queue.StoredResponse{Status: 200})
				})
			}
		}
	}
	if batch < 5 {
		t.Fatalf("the queue drained in %d batches: the case did not exercise long queues", batch)
	}
}
