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

// testCompact: Filter.AckedBefore selects only acked records acknowledged
// before the cut-off (Outbox.Compact), never pending ones.
func testCompact(t *testing.T, s outbox.Store) {
	for i := 0; i < 3; i++ {
		enqueue(t, s, NewRecord("c"+strconv.Itoa(i), "alice", "comment", "", "", nil), 0)
	}
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0, 2) // c0, c1 leased
	for i, at := range []time.Time{T0, T0.Add(time.Hour)} {
		id := "c" + strconv.Itoa(i)
		transition(t, s, l, id, func(r queue.Record) (queue.Record, error) { return queue.MarkSending(r, l, at) })
		transition(t, s, l, id, func(r queue.Record) (queue.Record, error) {
			return queue.Ack(r, l, at, queue.StoredResponse{Status: 200})
		})
	}
	n, err := s.Delete(bg, outbox.Filter{AckedBefore: T0.Add(time.Minute)})
	if n != 1 || err != nil {
		t.Fatalf("compact: deleted %d %v", n, err)
	}
	if got := ids(list(t, s, outbox.Filter{})); got != "c1,c2" {
		t.Fatalf("left %s", got)
	}
}

func testList(t *testing.T, s outbox.Store) {
	for i, u := range []string{"alice", "bob", "alice", "alice", "bob"} {
		r := NewRecord("r"+strconv.Itoa(i), u, "comment", "", "", nil)
		r.PayloadSchemaVersion = 1 + i%2
		enqueue(t, s, r, 0)
	}
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0, 1) // r0 leased
	for _, c := range []struct {
		f    outbox.Filter
		want string
	}{
		{outbox.Filter{}, "r0,r1,r2,r3,r4"},
		{outbox.Filter{UserID: "alice"}, "r0,r2,r3"},
		{outbox.Filter{UserID: "bob", Limit: 1}, "r1"},
		{outbox.Filter{Statuses: []queue.Status{queue.StatusLeased}}, "r0"},
		{outbox.Filter{Statuses: []queue.Status{queue.StatusPending, queue.StatusLeased}, Limit: 3}, "r0,r1,r2"},
		{outbox.Filter{IDs: []string{"r4", "r0", "zz"}}, "r0,r4"},
		{outbox.Filter{MinSchemaVersion: 2}, "r1,r3"},
		{outbox.Filter{UserID: "alice", Statuses: []queue.Status{queue.StatusPending}}, "r2,r3"},
	} {
		if got := ids(list(t, s, c.f)); got != c.want {
			t.Errorf("List(%+v) = %s, want %s", c.f, got, c.want)
		}
	}
}

func testStatus(t *testing.T, s outbox.Store) {
	p, err := s.Status(bg)
	if err != nil || p.Pending+p.Sending+p.Acked != 0 || !p.OldestPendingAt.IsZero() {
		t.Fatalf("empty store: %+v %v", p, err)
	}
	for i := 0; i < 7; i++ {
		r := NewRecord("r"+strconv.Itoa(i), "alice", "comment", "", "e"+strconv.Itoa(i), nil)
		r.CreatedAt = T0.Add(time.Duration(i) * time.Second)
		enqueue(t, s, r, 0)
	}
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0.Add(time.Hour), 5) // r0..r4 leased
	send := func(id string) {
		transition(t, s, l, id, func(r queue.Record) (queue.Record, error) { return queue.MarkSending(r, l, T0) })
	}
	for _, id := range []string{"r0", "r1", "r2", "r3"} {
		send(id)
	}
	transition(t, s, l, "r0", func(r queue.Record) (queue.Record, error) {
		return queue.Ack(r, l, T0, queue.StoredResponse{Status: 200})
	})
	transition(t, s, l, "r1", func(r queue.Record) (queue.Record, error) {
		return queue.Retry(r, l, T0, T0.Add(time.Minute), queue.ErrorInfo{Code: "http_503"})
	})
	transition(t, s, l, "r2", func(r queue.Record) (queue.Record, error) {
		return queue.MarkConflict(r, l, T0, queue.ErrorInfo{Code: "http_409"})
	})
	if _, err := s.UpdateMeta(bg, func(m *outbox.Meta) error { m.Paused = true; return nil }); err != nil {
		t.Fatal(err)
	}
	p, err = s.Status(bg)
	if err != nil {
		t.Fatal(err)
	}
	// r0 acked, r1 failed, r2 conflict, r3 sending, r4 leased, r5 r6 pending.
	if p.Acked != 1 || p.Failed != 1 || p.Conflict != 1 || p.Sending != 2 || p.Pending != 2 || p.DeadLetter != 0 || p.Terminal != 0 || !p.Paused {
		t.Fatalf("projection %+v", p)
	}
	if !p.OldestPendingAt.Equal(T0.Add(time.Second)) {
		t.Fatalf("oldest pending %v", p.OldestPendingAt)
	}
	if !p.LastAckAt.Equal(T0) {
		t.Fatalf("last ack %v, want r0's, %v", p.LastAckAt, T0)
	}
	// LastAckAt is the ack time of the acked record of the highest seq.
	transition(t, s, l, "r3", func(r queue.Record) (queue.Record, error) {
		return queue.Ack(r, l, T0.Add(5*time.Second), queue.StoredResponse{Status: 200})
	})
	if p, err = s.Status(bg); err != nil || p.Acked != 2 || !p.LastAckAt.Equal(T0.Add(5*time.Second)) {
		t.Fatalf("after r3's ack: %+v %v", p, err)
	}
}

func testLease(t *testing.T, s outbox.Store) {
	if _, found, err := s.GetLease(bg, "flush"); found || err != nil {
		t.Fatalf("fresh store has a lease: %v %v", found, err)
	}
	l1 := acquire(t, s, "tab1", T0, false)
	if l1.Token != 1 || l1.Owner != "tab1" || l1.Name != "flush" || !l1.ExpiresAt.Equal(T0.Add(30*time.Second)) {
		t.Fatalf("acquired %+v", l1)
	}
	if _, err := s.UpdateLease(bg, "flush", queue.AcquireLease("tab2", T0.Add(time.Second), 30*time.Second, false)); !errors.Is(err, queue.ErrLeaseHeld) {
		t.Fatalf("acquire of a held lease: %v", err)
	}
	cur, found, err := s.GetLease(bg, "flush")
	if !found || err != nil || cur.Owner != "tab1" || cur.Token != 1 {
		t.Fatalf("lease changed: %+v", cur)
	}
	r, err := s.UpdateLease(bg, "flush", queue.RenewLease(l1, T0.Add(10*time.Second), 30*time.Second))
	if err != nil || !r.ExpiresAt.Equal(T0.Add(40*time.Second)) || r.Token != 1 {
		t.Fatalf("renew %+v %v", r, err)
	}
	_, err = s.UpdateLease(bg, "flush", queue.ReleaseLease(l1, T0.Add(11*time.Second)))
	require.NoError(t, err)
	l2 := acquire(t, s, "tab2", T0.Add(12*time.Second), false)
	if l2.Token != 2 || l2.Owner != "tab2" {
		t.Fatalf("after release %+v", l2)
	}
	if _, err := s.UpdateLease(bg, "flush", queue.RenewLease(l1, T0.Add(13*time.Second), time.Minute)); !errors.Is(err, queue.ErrStaleOwner) {
		t.Fatalf("stale renew: %v", err)
	}
	if _, err := s.UpdateLease(bg, "flush", queue.ReleaseLease(l1, T0.Add(13*time.Second))); !errors.Is(err, queue.ErrStaleOwner) {
		t.Fatalf("stale release: %v", err)
	}
	cur, _, _ = s.GetLease(bg, "flush")
	if cur.Owner != "tab2" || cur.Token != 2 || !cur.ExpiresAt.Equal(l2.ExpiresAt) {
		t.Fatalf("stale owner changed the lease: %+v", cur)
	}
	l3 := acquire(t, s, "tab1", T0.Add(13*time.Second), true)
	if l3.Token != 3 {
		t.Fatalf("steal %+v", l3)
	}
	if _, found, _ := s.GetLease(bg, "other"); found {
		t.Fatal("leases are per name")
	}
}

func testMeta(t *testing.T, s outbox.Store) {
	m, err := s.UpdateMeta(bg, func(*outbox.Meta) error { return nil })
	if err != nil || m.Paused || len(m.AuthPaused) != 0 || m.LastError != nil {
		t.Fatalf("fresh meta %+v %v", m, err)
	}
	m, err = s.UpdateMeta(bg, func(m *outbox.Meta) error {
		m.Paused = true
		m.AuthPaused = append(m.AuthPaused, "alice", "bob")
		m.LastFlushAt = T0
		m.LastError = &queue.ErrorInfo{Code: "network", Message: "offline", At: T0}
		return nil
	})
	if err != nil || !m.Paused {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateMeta(bg, func(m *outbox.Meta) error { m.Paused = false; m.AuthPaused = nil; return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	got, err := s.UpdateMeta(bg, func(*outbox.Meta) error { return nil })
	if err != nil || !got.Paused || len(got.AuthPaused) != 2 || got.AuthPaused[1] != "bob" || !got.LastFlushAt.Equal(T0) ||
		got.LastError == nil || got.LastError.Message != "offline" {
		t.Fatalf("meta %+v %v", got, err)
	}
	p, _ := s.Status(bg)
	if !p.Paused || len(p.AuthPaused) != 2 {
		t.Fatalf("status meta %+v", p.Meta)
	}
}

func testRoundTrip(t *testing.T, s outbox.Store) {
	r := NewRecord("full", "alice", "comment", "ok", "n1", []byte{0, 1, 2, 255})
	r.DependencyIDs = []string{"d1", "d2"}
	r.AuthGeneration = 1<<53 - 1
	r.TenantID = "t1"
	stored := enqueue(t, s, r, 0).Record
	same(t, stored, get(t, s, "full"))
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0, 1)
	transition(t, s, l, "full", func(r queue.Record) (queue.Record, error) { return queue.MarkSending(r, l, T0) })
	d := transition(t, s, l, "full", func(r queue.Record) (queue.Record, error) {
		return queue.Retry(r, l, T0, T0.Add(time.Hour), queue.ErrorInfo{Code: "http_500", Message: "x", Status: 500})
	})
	same(t, d, get(t, s, "full"))
	if rs := list(t, s, outbox.Filter{}); len(rs) != 1 {
		t.Fatalf("list %s", ids(rs))
	} else {
		same(t, d, rs[0])
	}
}
