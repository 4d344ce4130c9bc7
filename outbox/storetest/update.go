package storetest

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

func testUpdateStale(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	enqueue(t, s, NewRecord("b", "alice", "comment", "", "n2", nil), 0)
	l1 := acquire(t, s, "tab1", T0, true)
	claim(t, s, l1, "alice", T0, 10)
	before := get(t, s, "a")
	l2 := acquire(t, s, "tab2", T0.Add(time.Second), true)
	called := false
	_, err := Update(s, l1, "a", func(r *queue.Record) error { called = true; r.Status = queue.StatusAcked; return nil })
	if !errors.Is(err, queue.ErrStaleOwner) || called {
		t.Fatalf("stale update: %v (fn called %v)", err, called)
	}
	same(t, before, get(t, s, "a"))
	// The current owner cannot touch a record leased to the old one either.
	_, err = Update(s, l2, "a", func(r *queue.Record) error { called = true; return nil })
	if !errors.Is(err, queue.ErrStaleOwner) || called {
		t.Fatalf("update of a record leased to another token: %v", err)
	}
	same(t, before, get(t, s, "a"))
	if _, err := Update(s, l2, "missing", func(*queue.Record) error { return nil }); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("missing record: %v", err)
	}
}

func testUpdateFn(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", []byte("p")), 0)
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0, 10)
	before := get(t, s, "a")
	boom := errors.New("boom")
	if _, err := Update(s, l, "a", func(r *queue.Record) error { r.Attempts = 99; return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	same(t, before, get(t, s, "a"))
	// A transition that refuses leaves the record unchanged too.
	if _, err := Update(s, l, "a", func(r *queue.Record) error {
		n, err := queue.Ack(*r, l, T0, queue.StoredResponse{Status: 200})
		*r = n
		return err
	}); !errors.Is(err, queue.ErrInvalidTransition) {
		t.Fatalf("ack of a leased record: %v", err)
	}
	same(t, before, get(t, s, "a"))
	sent := transition(t, s, l, "a", func(r queue.Record) (queue.Record, error) { return queue.MarkSending(r, l, T0) })
	acked := transition(t, s, l, "a", func(r queue.Record) (queue.Record, error) {
		return queue.Ack(r, l, T0.Add(time.Second), queue.StoredResponse{Status: 201, Body: []byte(`{"ok":true}`), Replayed: true})
	})
	if sent.Attempts != 1 || acked.Status != queue.StatusAcked || acked.Response == nil || string(acked.Response.Body) != `{"ok":true}` {
		t.Fatalf("got %+v", acked)
	}
	same(t, acked, get(t, s, "a"))
}

// updateFn adapts a transition to an UpdateBatch Fn.
func updateFn(tr func(queue.Record) (queue.Record, error)) func(*queue.Record) error {
	return func(r *queue.Record) error {
		n, err := tr(*r)
		if err != nil {
			return err
		}
		*r = n
		return nil
	}
}

// testUpdateBatch: the flush's step (ack the previous record of an entity,
// charge the next) and the group commit of several lanes, in one call: each
// update applies in order or fails alone.
func testUpdateBatch(t *testing.T, s outbox.Store) {
	for _, id := range []string{"a", "b", "c", "d"} {
		enqueue(t, s, NewRecord(id, "alice", "comment", "", "n-"+id, []byte("p-"+id)), 0)
	}
	enqueue(t, s, NewRecord("e", "alice", "comment", "", "n-e", nil), 0)
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0, 4) // a..d leased, e stays pending
	transition(t, s, l, "a", func(r queue.Record) (queue.Record, error) { return queue.MarkSending(r, l, T0) })
	beforeD, beforeE := get(t, s, "d"), get(t, s, "e")
	boom := errors.New("boom")
	ackOK, order := false, ""
	res, err := s.UpdateBatch(bg, l, []outbox.RecordUpdate{
		{ID: "a", Fn: func(r *queue.Record) error {
			order += "a"
			n, err := queue.Ack(*r, l, T0.Add(time.Second), queue.StoredResponse{Status: 201, Body: []byte("ok")})
			*r = n
			ackOK = err == nil
			return err
		}},
		{ID: "b", Fn: func(r *queue.Record) error {
			order += "b"
			if !ackOK { // a Fn sees the outcome of the earlier ones
				return errors.New("ack not applied first")
			}
			return updateFn(func(r queue.Record) (queue.Record, error) { return queue.MarkSending(r, l, T0) })(r)
		}},
		{ID: "missing", Fn: func(*queue.Record) error { order += "!"; return nil }},
		{ID: "d", Fn: func(r *queue.Record) error { order += "d"; r.Attempts = 99; return boom }},
		{ID: "e", Fn: func(r *queue.Record) error { order += "e"; return nil }}, // not leased
		{ID: "c", Fn: updateFn(func(r queue.Record) (queue.Record, error) { return queue.MarkSending(r, l, T0) })},
		{ID: "c", Fn: updateFn(func(r queue.Record) (queue.Record, error) { // sees the earlier change of c
			return queue.Refund(r, l, T0.Add(2*time.Second), nil)
		})},
	})
	require.NoError(t, err, "batch")
	if order != "abd" || len(res) != 7 {
		t.Fatalf("fns ran %q (want abd), %d results", order, len(res))
	}
	if res[0].Err != nil || res[0].Record.Status != queue.StatusAcked || res[1].Err != nil || res[1].Record.Status != queue.StatusSending || res[1].Record.Attempts != 1 {
		t.Fatalf("a, b: %+v / %+v", res[0], res[1])
	}
	if !errors.Is(res[2].Err, outbox.ErrNotFound) || !errors.Is(res[3].Err, boom) || !errors.Is(res[4].Err, queue.ErrStaleOwner) {
		t.Fatalf("per-record errors: %v, %v, %v", res[2].Err, res[3].Err, res[4].Err)
	}
	if res[5].Err != nil || res[6].Err != nil || res[6].Record.Status != queue.StatusPending || res[6].Record.Attempts != 0 {
		t.Fatalf("c: %+v / %+v", res[5], res[6])
	}
	same(t, res[0].Record, get(t, s, "a"))
	same(t, res[1].Record, get(t, s, "b"))
	same(t, res[6].Record, get(t, s, "c"))
	same(t, beforeD, get(t, s, "d"))
	same(t, beforeE, get(t, s, "e"))
	if a := get(t, s, "a"); a.Response == nil || string(a.Response.Body) != "ok" {
		t.Fatalf("a's response: %+v", a.Response)
	}
	// Nothing to write: no error, nothing changed.
	res, err = s.UpdateBatch(bg, l, []outbox.RecordUpdate{{ID: "d", Fn: func(*queue.Record) error { return boom }}})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, boom) {
		t.Fatalf("all failing: %v %+v", err, res)
	}
	same(t, beforeD, get(t, s, "d"))
	// A cancelled context writes nothing.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := s.UpdateBatch(ctx, l, []outbox.RecordUpdate{{ID: "d", Fn: updateFn(func(r queue.Record) (queue.Record, error) { return queue.MarkSending(r, l, T0) })}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	same(t, beforeD, get(t, s, "d"))
}

// testUpdateBatchStale: a stale lease changes nothing and runs no Fn.
func testUpdateBatchStale(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	enqueue(t, s, NewRecord("b", "alice", "comment", "", "n2", nil), 0)
	l1 := acquire(t, s, "tab1", T0, true)
	claim(t, s, l1, "alice", T0, 10)
	transition(t, s, l1, "a", func(r queue.Record) (queue.Record, error) { return queue.MarkSending(r, l1, T0) })
	beforeA, beforeB := get(t, s, "a"), get(t, s, "b")
	acquire(t, s, "tab2", T0.Add(time.Second), true)
	called := false
	fn := func(r *queue.Record) error { called = true; r.Status = queue.StatusAcked; return nil }
	res, err := s.UpdateBatch(bg, l1, []outbox.RecordUpdate{{ID: "a", Fn: fn}, {ID: "b", Fn: fn}})
	if !errors.Is(err, queue.ErrStaleOwner) || called || res != nil {
		t.Fatalf("stale batch: %v (fn called %v, %d results)", err, called, len(res))
	}
	same(t, beforeA, get(t, s, "a"))
	same(t, beforeB, get(t, s, "b"))
}

func testAmend(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	before := get(t, s, "a")
	retry := func(r *queue.Record) error {
		n, err := queue.AppRetry(*r, T0.Add(time.Hour))
		*r = n
		return err
	}
	if _, err := s.Amend(bg, "a", retry); !errors.Is(err, queue.ErrInvalidTransition) {
		t.Fatalf("retry of a pending record: %v", err)
	}
	same(t, before, get(t, s, "a"))
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0, 10)
	transition(t, s, l, "a", func(r queue.Record) (queue.Record, error) { return queue.MarkSending(r, l, T0) })
	transition(t, s, l, "a", func(r queue.Record) (queue.Record, error) {
		return queue.Terminal(r, l, T0, queue.ErrorInfo{Code: "http_422", Status: 422})
	})
	got, err := s.Amend(bg, "a", retry)
	if err != nil || got.Status != queue.StatusPending || got.Attempts != 0 || got.LastError == nil {
		t.Fatalf("amend: %+v %v", got, err)
	}
	same(t, got, get(t, s, "a"))
	if _, err := s.Amend(bg, "missing", retry); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

func testDelete(t *testing.T, s outbox.Store) {
	for i := 0; i < 3; i++ {
		enqueue(t, s, NewRecord("a"+strconv.Itoa(i), "alice", "comment", "", "", bytes.Repeat([]byte("x"), 20)), 8)
		enqueue(t, s, NewRecord("b"+strconv.Itoa(i), "bob", "comment", "", "", nil), 0)
	}
	n, err := s.Delete(bg, outbox.Filter{UserID: "alice", Statuses: []queue.Status{queue.StatusDeadLetter}})
	if n != 0 || err != nil {
		t.Fatalf("deleted %d %v", n, err)
	}
	n, err = s.Delete(bg, outbox.Filter{UserID: "bob", Limit: 2})
	if n != 2 || err != nil {
		t.Fatalf("limit: deleted %d %v", n, err)
	}
	if rs := list(t, s, outbox.Filter{UserID: "bob"}); len(rs) != 1 {
		t.Fatalf("bob has %s", ids(rs))
	}
	n, err = s.Delete(bg, outbox.Filter{IDs: []string{"a1", "b0", "nope"}, UserID: "alice"})
	if n != 1 || err != nil {
		t.Fatalf("ids: deleted %d %v", n, err)
	}
	if _, err := s.Payload(bg, "blob:a1"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("blob kept: %v", err)
	}
	n, err = s.Delete(bg, outbox.Filter{UserID: "alice"})
	if n != 2 || err != nil {
		t.Fatalf("user: deleted %d %v", n, err)
	}
	if rs := list(t, s, outbox.Filter{}); len(rs) != 1 || rs[0].UserID != "bob" {
		t.Fatalf("left %s", ids(rs))
	}
}
