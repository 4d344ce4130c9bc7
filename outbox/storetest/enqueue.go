package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

func testAppend(t *testing.T, s outbox.Store) {
	a := enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", []byte("1")), 0)
	b := enqueue(t, s, NewRecord("b", "alice", "comment", "", "n1", []byte("2")), 0)
	if a.Action != queue.ActionAppended || b.Action != queue.ActionAppended || a.ID != "a" || b.ID != "b" {
		t.Fatalf("actions %v %v", a, b)
	}
	if a.Record.Seq == 0 || b.Record.Seq <= a.Record.Seq {
		t.Fatalf("seq not increasing: %d %d", a.Record.Seq, b.Record.Seq)
	}
	same(t, a.Record, get(t, s, "a"))
	same(t, b.Record, get(t, s, "b"))
	if g := get(t, s, "a"); g.PayloadHash != queue.HashPayload([]byte("1")) || g.Status != queue.StatusPending {
		t.Fatalf("stored %+v", g)
	}
}

func testReplace(t *testing.T, s outbox.Store) {
	a := enqueue(t, s, NewRecord("a", "alice", "title", "title:n1", "n1", []byte(`"draft"`)), 0)
	r2 := NewRecord("b", "alice", "title", "title:n1", "n1", []byte(`"final"`))
	r2.CreatedAt = T0.Add(time.Second)
	b := enqueue(t, s, r2, 0)
	if b.Action != queue.ActionReplaced || b.ID != "a" {
		t.Fatalf("got %+v", b)
	}
	g := get(t, s, "a")
	if string(g.Payload) != `"final"` || g.PayloadHash != queue.HashPayload([]byte(`"final"`)) || g.Seq != a.Record.Seq || g.IdempotencyKey != "key-a" {
		t.Fatalf("stored %+v", g)
	}
	same(t, b.Record, g)
	if rs := list(t, s, outbox.Filter{}); len(rs) != 1 {
		t.Fatalf("want 1 record, got %s", ids(rs))
	}
}

func testReplaceAfterSend(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "title", "title:n1", "n1", []byte("1")), 0)
	l := acquire(t, s, "tab1", T0, true)
	if got := claim(t, s, l, "alice", T0, 10); len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	transition(t, s, l, "a", func(r queue.Record) (queue.Record, error) { return queue.MarkSending(r, l, T0) })
	b := enqueue(t, s, NewRecord("b", "alice", "title", "title:n1", "n1", []byte("2")), 0)
	if b.Action != queue.ActionAppended || b.ID != "b" {
		t.Fatalf("a sent record must not be replaced: %+v", b)
	}
	if g := get(t, s, "a"); string(g.Payload) != "1" || g.Status != queue.StatusSending {
		t.Fatalf("sent record changed: %+v", g)
	}
}

func testMerge(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "tags", "tags:n1", "n1", []byte("x")), 0)
	m := enqueue(t, s, NewRecord("b", "alice", "tags", "tags:n1", "n1", []byte("y")), 0)
	if m.Action != queue.ActionMerged || m.ID != "a" || string(get(t, s, "a").Payload) != "x,y" {
		t.Fatalf("got %+v", m)
	}
}

func testDrop(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "star", "star:n1", "n1", []byte("1")), 0)
	d := enqueue(t, s, NewRecord("b", "alice", "star", "star:n1", "n1", []byte("2")), 0)
	if d.Action != queue.ActionDropped || d.ID != "a" {
		t.Fatalf("got %+v", d)
	}
	if _, err := s.Get(bg, "b"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("dropped record stored: %v", err)
	}
	if g := get(t, s, "a"); string(g.Payload) != "1" {
		t.Fatalf("kept record changed: %+v", g)
	}
}

func testOtherUser(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "title", "title:n1", "n1", []byte("1")), 0)
	b := enqueue(t, s, NewRecord("b", "bob", "title", "title:n1", "n1", []byte("2")), 0)
	if b.Action != queue.ActionAppended {
		t.Fatalf("another user's record was coalesced: %+v", b)
	}
	if string(get(t, s, "a").Payload) != "1" {
		t.Fatal("alice's record changed")
	}
}

func testBlob(t *testing.T, s outbox.Store) {
	big := bytes.Repeat([]byte("z"), 100)
	a := enqueue(t, s, NewRecord("a", "alice", "tags", "tags:n1", "n1", big), 8)
	if a.Record.PayloadRef == "" || a.Record.Payload != nil {
		t.Fatalf("payload above the limit not stored by reference: %+v", a.Record)
	}
	g := get(t, s, "a")
	if g.PayloadRef != a.Record.PayloadRef || len(g.Payload) != 0 || g.PayloadHash != queue.HashPayload(big) {
		t.Fatalf("stored %+v", g)
	}
	p, err := s.Payload(bg, g.PayloadRef)
	if err != nil || !bytes.Equal(p, big) {
		t.Fatalf("payload %q %v", p, err)
	}
	// Merge loads the older blob and writes the merged one.
	m := enqueue(t, s, NewRecord("b", "alice", "tags", "tags:n1", "n1", []byte("y")), 8)
	if m.Action != queue.ActionMerged {
		t.Fatalf("got %+v", m)
	}
	p, err = s.Payload(bg, m.Record.PayloadRef)
	if want := append(append([]byte{}, big...), ",y"...); err != nil || !bytes.Equal(p, want) {
		t.Fatalf("merged payload %q %v", p, err)
	}
	// A small replacement moves inline and deletes the blob.
	title := enqueue(t, s, NewRecord("t", "alice", "title", "title:n2", "n2", big), 8)
	r := enqueue(t, s, NewRecord("u", "alice", "title", "title:n2", "n2", []byte("s")), 8)
	if r.Action != queue.ActionReplaced || r.Record.PayloadRef != "" || string(r.Record.Payload) != "s" {
		t.Fatalf("got %+v", r)
	}
	if _, err := s.Payload(bg, title.Record.PayloadRef); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("old blob kept: %v", err)
	}
	if g := get(t, s, "t"); string(g.Payload) != "s" || g.PayloadRef != "" {
		t.Fatalf("stored %+v", g)
	}
	// Deleting the record deletes its blob.
	ref := m.Record.PayloadRef
	if n, err := s.Delete(bg, outbox.Filter{IDs: []string{"a"}}); n != 1 || err != nil {
		t.Fatalf("delete %d %v", n, err)
	}
	if _, err := s.Payload(bg, ref); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("blob of deleted record kept: %v", err)
	}
	if _, err := s.Payload(bg, "blob:nothing"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("missing blob: %v", err)
	}
}

func testInvalid(t *testing.T, s outbox.Store) {
	r := NewRecord("a", "alice", "comment", "", "n1", nil)
	r.IdempotencyKey = ""
	if _, err := s.Enqueue(bg, queue.EnqueueRequest{Record: r, Policy: policies["comment"]}); !errors.Is(err, queue.ErrInvalidRecord) {
		t.Fatalf("got %v", err)
	}
	r = NewRecord("b", "alice", "comment", "", "n1", nil)
	if _, err := s.Enqueue(bg, queue.EnqueueRequest{Record: r, Policy: queue.Policy{Dedupe: "guess"}}); !errors.Is(err, queue.ErrUnknownOperation) {
		t.Fatalf("got %v", err)
	}
	boom := errors.New("merge failed")
	enqueue(t, s, NewRecord("c", "alice", "tags", "k", "n1", []byte("1")), 0)
	_, err := s.Enqueue(bg, queue.EnqueueRequest{Record: NewRecord("d", "alice", "tags", "k", "n1", []byte("2")),
		Policy: queue.Policy{Dedupe: queue.Merge, Merge: func(a, b []byte) ([]byte, error) { return nil, boom }}})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if rs := list(t, s, outbox.Filter{}); ids(rs) != "c" || string(rs[0].Payload) != "1" {
		t.Fatalf("store changed: %s", ids(rs))
	}
	// The seq counter did not move either: the next append follows c.
	c := get(t, s, "c")
	e := enqueue(t, s, NewRecord("e", "alice", "comment", "", "n1", nil), 0)
	if e.Record.Seq <= c.Seq {
		t.Fatalf("seq %d after %d", e.Record.Seq, c.Seq)
	}
}

func testCancelled(t *testing.T, s outbox.Store) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := s.Enqueue(ctx, queue.EnqueueRequest{Record: NewRecord("a", "alice", "comment", "", "", nil), Policy: policies["comment"]}); err == nil {
		t.Fatal("enqueue with a cancelled context succeeded")
	}
	if _, err := s.UpdateLease(ctx, "flush", queue.AcquireLease("x", T0, time.Second, true)); err == nil {
		t.Fatal("lease with a cancelled context succeeded")
	}
	if rs := list(t, s, outbox.Filter{}); len(rs) != 0 {
		t.Fatalf("written: %s", ids(rs))
	}
	if _, found, err := s.GetLease(bg, "flush"); found || err != nil {
		t.Fatalf("lease written: %v %v", found, err)
	}
}
