package storetest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// testFlush runs the real flusher over the store against an in-Go receiver
// with idempotency: every record acked, each applied once.
func testFlush(t *testing.T, s outbox.Store, n int) {
	if n <= 0 {
		n = 200
	}
	var mu sync.Mutex
	applied := map[string]int{}
	server := outbox.TransportFunc(func(_ context.Context, req outbox.Request) (outbox.Response, error) {
		key, err := wire.ParseIdempotencyKey(req.Header.Get(wire.HeaderIdempotencyKey))
		if err != nil {
			return outbox.Response{Status: 400}, nil
		}
		mu.Lock()
		defer mu.Unlock()
		applied[key]++
		if applied[key] > 1 {
			return outbox.Response{Status: 200, Header: outbox.Header{wire.HeaderReplayed: "true"}}, nil
		}
		return outbox.Response{Status: 201, Body: []byte(`{"ok":true}`)}, nil
	})
	ob, err := outbox.New(outbox.Config{Name: "conformance", Store: s, Transport: server, Policies: policies,
		BatchSize: 50, MaxFlushDuration: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ob.Login(context.Background(), outbox.Session{UserID: "alice", TenantID: "t1"})
	for i := 0; i < n; i++ {
		if _, err := ob.Enqueue(bg, outbox.Op{OperationType: "comment", EntityType: "note", EntityID: "n" + strconv.Itoa(i%8), Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
	}
	lease, err := ob.Acquire(bg, "tab1", true)
	if err != nil {
		t.Fatal(err)
	}
	lease.Resource, lease.FenceToken = "outbox:conformance", lease.Token
	rep, err := ob.Flush(bg, lease)
	if err != nil || rep.Acked != n {
		t.Fatalf("flush: %+v %v", rep, err)
	}
	st, err := ob.Status(bg)
	if err != nil || st.Acked != n || st.Pending+st.Sending+st.Failed != 0 {
		t.Fatalf("status %+v %v", st, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(applied) != n {
		t.Fatalf("server applied %d distinct keys, want %d", len(applied), n)
	}
	for k, c := range applied {
		if c != 1 {
			t.Fatalf("key %s sent %d times", k, c)
		}
	}
}

func testCorrupt(t *testing.T, s outbox.Store, opts Options) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	opts.InjectCorrupt(t, s, "bad")
	enqueue(t, s, NewRecord("b", "alice", "comment", "", "n1", nil), 0)
	if rs := list(t, s, outbox.Filter{}); ids(rs) != "a,b" {
		t.Fatalf("list %s", ids(rs))
	}
	if rs := list(t, s, outbox.Filter{UserID: "alice"}); ids(rs) != "a,b" {
		t.Fatalf("list by user %s", ids(rs))
	}
	if _, err := s.Get(bg, "bad"); !errors.Is(err, opts.ErrCorrupt) {
		t.Fatalf("get of a corrupt record: %v", err)
	}
	if _, err := s.Amend(bg, "bad", func(*queue.Record) error { return nil }); err == nil {
		t.Fatal("amend of a corrupt record succeeded")
	}
	if p, err := s.Status(bg); err != nil || p.Pending != 2 {
		t.Fatalf("status %+v %v", p, err)
	}
	l := acquire(t, s, "tab1", T0, true)
	if got := claim(t, s, l, "alice", T0, 10); ids(got) != "a,b" {
		t.Fatalf("claim %s", ids(got))
	}
	if n, err := s.Delete(bg, outbox.Filter{}); n != 2 || err != nil {
		t.Fatalf("delete %d %v", n, err)
	}
	// The corrupt value is left for a human; it was never rewritten.
	if _, err := s.Get(bg, "bad"); !errors.Is(err, opts.ErrCorrupt) {
		t.Fatalf("corrupt record after delete: %v", err)
	}
}
