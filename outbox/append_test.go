package outbox_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/memstore"
	"github.com/tabfence/tabfence/outbox/queue"
)

func appendOutbox(t *testing.T, events *[]outbox.Event) *outbox.Outbox {
	t.Helper()
	ob, err := outbox.New(outbox.Config{Name: "r", Store: memstore.New(), Transport: outbox.TransportFunc(nil), MaxAttempts: 7,
		NewID: seqIDs(), Clock: &fakeClock{now: t0}, InlineLimit: 100,
		Events: outbox.EventsFunc(func(e outbox.Event) { *events = append(*events, e) }),
		Policies: map[string]queue.Policy{
			"comment": {Dedupe: queue.Append, MaxAttempts: 3},
			"title":   {Dedupe: queue.ReplaceLatest},
			"tags":    {Dedupe: queue.Merge, Merge: func(a, b []byte) ([]byte, error) { return b, nil }},
			"star":    {Dedupe: queue.DropIfExists},
			"guess":   {Dedupe: "guess"},
		}})
	require.NoError(t, err)
	return ob
}

// PlainAppend builds exactly the record Enqueue stores for a plain append
// (the same ids and time, given the same sources), and takes nothing else:
// no session, an unknown type or policy, a key a dedupe policy coalesces
// by, a payload for the blob store are left to Enqueue.
func TestPlainAppendIsWhatEnqueueWrites(t *testing.T) {
	var events []outbox.Event
	ob := appendOutbox(t, &events)
	if _, ok := ob.PlainAppend(outbox.Op{OperationType: "comment", Payload: []byte("x")}); ok {
		t.Fatal("a plain append without a session")
	}
	ob.Login(context.Background(), outbox.Session{UserID: "alice", TenantID: "t", AuthGeneration: 4})
	plain := []outbox.Op{
		{OperationType: "comment", OperationKey: "k", EntityType: "note", EntityID: "n1", Payload: []byte(`{"a":1}`), DependencyIDs: []string{"d1"}},
		{OperationType: "title", EntityID: "n2", Payload: []byte("t")},
		{OperationType: "star", Payload: nil},
		{OperationType: "comment", Payload: []byte(strings.Repeat("x", 100))},
	}
	for i, op := range plain {
		rec, ok := ob.PlainAppend(op)
		if !ok {
			t.Fatalf("op %d not a plain append", i)
		}
		ob.ForgetAppend(rec.ID)
		// The same sources again: Enqueue draws the same next ids.
		ob.ConfigForTest().NewID = replay(rec.IdempotencyKey, rec.ID, ob.ConfigForTest().NewID) // the key is drawn first
		res, err := ob.Enqueue(context.Background(), op)
		require.NoError(t, err)
		stored, err := ob.ConfigForTest().Store.(*memstore.Store).Get(context.Background(), res.ID)
		require.NoError(t, err)
		stored.Seq = 0
		if !reflect.DeepEqual(rec, stored) {
			t.Fatalf("op %d:\nPlainAppend %+v\nEnqueue     %+v", i, rec, stored)
		}
	}
	for i, op := range []outbox.Op{
		{OperationType: "title", OperationKey: "k", Payload: []byte("t")},
		{OperationType: "tags", OperationKey: "k", Payload: []byte("t")},
		{OperationType: "star", OperationKey: "k", Payload: []byte("t")},
		{OperationType: "guess", Payload: []byte("t")},
		{OperationType: "nope", Payload: []byte("t")},
		{OperationType: "comment", Payload: []byte(strings.Repeat("x", 101))},
	} {
		if _, ok := ob.PlainAppend(op); ok {
			t.Fatalf("declined op %d taken", i)
		}
	}
}

// replay returns a NewID that gives ids first, then next's.
func replay(a, b string, next func() string) func() string {
	ids := []string{a, b}
	return func() string {
		if len(ids) == 0 {
			return next()
		}
		id := ids[0]
		ids = ids[1:]
		return id
	}
}

// A committed plain append gets its enqueue event once, with its key's
// hash and creation time; a forgotten one, an unknown id or a second
// report gets none. Pending appends are bounded.
func TestCommittedAppend(t *testing.T) {
	var events []outbox.Event
	ob := appendOutbox(t, &events)
	ob.Login(context.Background(), outbox.Session{UserID: "alice"})
	a, ok := ob.PlainAppend(outbox.Op{OperationType: "comment", OperationKey: "k", Payload: []byte("x")})
	require.True(t, ok)
	b, ok := ob.PlainAppend(outbox.Op{OperationType: "comment", Payload: []byte("y")})
	require.True(t, ok)
	ob.ForgetAppend(b.ID)
	require.True(t, ob.CommittedAppend(a.ID))
	require.False(t, ob.CommittedAppend(a.ID), "a second report")
	require.False(t, ob.CommittedAppend(b.ID), "a forgotten append")
	require.False(t, ob.CommittedAppend("nope"), "an unknown id")
	want := []outbox.Event{{Kind: outbox.EventEnqueue, At: t0, RecordID: a.ID, OperationKeyHash: outbox.HashKey("k"), Reason: "appended"}}
	require.Equal(t, want, events)

	for i := 0; i < outbox.MaxPendingAppends; i++ {
		if _, ok := ob.PlainAppend(outbox.Op{OperationType: "comment", Payload: []byte("z")}); !ok {
			t.Fatalf("append %d refused below the bound", i)
		}
	}
	_, ok = ob.PlainAppend(outbox.Op{OperationType: "comment", Payload: []byte("z")})
	require.False(t, ok, "an append beyond the bound of pending ones")
}

// The session hook runs after every Login and Logout with the new session
// in place, and before Logout's purge.
func TestSessionHookBeforePurge(t *testing.T) {
	var log []string
	ob, err := outbox.New(outbox.Config{Name: "h", Store: orderStore{memstore.New(), &log}, Transport: outbox.TransportFunc(nil),
		Policies: map[string]queue.Policy{"comment": {Dedupe: queue.Append}}})
	require.NoError(t, err)
	ob.OnSessionChange(func() {
		rec, ok := ob.PlainAppend(outbox.Op{OperationType: "comment", Payload: []byte("x")})
		ob.ForgetAppend(rec.ID)
		log = append(log, "hook "+ob.Session().UserID+map[bool]string{true: " appends", false: " none"}[ok])
	})
	ob.Login(context.Background(), outbox.Session{UserID: "alice"})
	_, err = ob.Logout(context.Background(), true)
	require.NoError(t, err)
	ob.Login(context.Background(), outbox.Session{UserID: "bob"})
	_, err = ob.Logout(context.Background(), false)
	require.NoError(t, err)
	want := []string{"hook alice appends", "hook  none", "delete alice", "hook bob appends", "hook  none"}
	if !reflect.DeepEqual(log, want) {
		t.Fatalf("order %q\nwant  %q", log, want)
	}
}

// orderStore records when Delete runs, relative to the session hook.
type orderStore struct {
	*memstore.Store
	log *[]string
}

func (s orderStore) Delete(ctx context.Context, f outbox.Filter) (int, error) {
	*s.log = append(*s.log, "delete "+f.UserID)
	return s.Store.Delete(ctx, f)
}

func TestHashKey(t *testing.T) {
	if outbox.HashKey("") != "" {
		t.Fatal("a hash of no key")
	}
	// sha256("k") = 8254c329a92850f6d539dd376f4816ee2764517da5e0235514af433164480d7a
	if got := outbox.HashKey("k"); got != "8254c329a92850f6" {
		t.Fatalf("HashKey(k) = %s", got)
	}
}
