package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

func TestEnqueueRecordShape(t *testing.T) {
	h := newHarness(t, nil)
	res := h.enqueue(outbox.Op{OperationType: "comment", OperationKey: "c", EntityType: "note", EntityID: "n1", Payload: []byte(`{"t":"hi"}`), DependencyIDs: []string{"x"}})
	require.Equal(t, queue.ActionAppended, res.Action)
	r := h.get(res.ID)
	require.Equal(t, queue.StatusPending, r.Status)
	require.Equal(t, "alice", r.UserID)
	require.Equal(t, "t1", r.TenantID)
	require.Equal(t, uint64(1), r.AuthGeneration)
	require.Equal(t, queue.HashPayload([]byte(`{"t":"hi"}`)), r.PayloadHash)
	require.Equal(t, 1, r.PayloadSchemaVersion)
	require.Equal(t, 10, r.MaxAttempts)
	require.Equal(t, t0, r.NextAttemptAt)
	require.Equal(t, t0, r.CreatedAt)
	require.Equal(t, uint64(1), r.Seq)
	require.Equal(t, []string{"x"}, r.DependencyIDs)
	require.True(t, wire.ValidKey(r.IdempotencyKey))
	require.True(t, r.IdempotencyKey != r.ID)
	require.Equal(t, "", r.PayloadRef)
	require.Equal(t, outbox.EventEnqueue, h.events[0].Kind)
}

func TestEnqueueRefusesUnknownTypeAndNoSession(t *testing.T) {
	h := newHarness(t, nil)
	_, err := h.ob.Enqueue(context.Background(), outbox.Op{OperationType: "guess"})
	require.ErrorIs(t, err, queue.ErrUnknownOperation)
	_, _ = h.ob.Logout(context.Background(), false)
	_, err = h.ob.Enqueue(context.Background(), outbox.Op{OperationType: "comment"})
	require.ErrorIs(t, err, outbox.ErrNoSession)
}

func TestAppendKeepsDistinctFacts(t *testing.T) {
	h := newHarness(t, nil)
	a := h.enqueue(outbox.Op{OperationType: "comment", OperationKey: "c", EntityID: "n", Payload: []byte("1")})
	b := h.enqueue(outbox.Op{OperationType: "comment", OperationKey: "c", EntityID: "n", Payload: []byte("1")})
	require.True(t, a.ID != b.ID)
	require.True(t, h.get(a.ID).IdempotencyKey != h.get(b.ID).IdempotencyKey)
}

func TestReplaceLatest(t *testing.T) {
	h := newHarness(t, nil)
	a := h.enqueue(outbox.Op{OperationType: "title", OperationKey: "title:n", EntityID: "n", Payload: []byte("v1")})
	b := h.enqueue(outbox.Op{OperationType: "title", OperationKey: "title:n", EntityID: "n", Payload: []byte("v2")})
	require.Equal(t, queue.ActionReplaced, b.Action)
	require.Equal(t, a.ID, b.ID)
	r := h.get(a.ID)
	require.Equal(t, "v2", string(r.Payload))
	require.Equal(t, queue.HashPayload([]byte("v2")), r.PayloadHash)
	require.Equal(t, h.get(a.ID).IdempotencyKey, a.Record.IdempotencyKey)
}

func TestReplaceNeverTouchesInFlightOrSent(t *testing.T) {
	h := newHarness(t, nil)
	a := h.enqueue(outbox.Op{OperationType: "title", OperationKey: "k", EntityID: "n", Payload: []byte("v1")})
	l := h.lease("A")
	planned, err := h.store.Claim(context.Background(), queue.ClaimRequest{Lease: l, Now: t0, Limit: 5, LeaseTTL: time.Minute, UserID: "alice", TenantID: "t1"})
	require.NoError(t, err)
	require.Len(t, planned, 1)
	// Planned only, still waiting: replacing it is still fine until the
	// flush takes it (in flight).
	require.Equal(t, queue.StatusPending, h.get(a.ID).Status)
	res, err := h.store.UpdateBatch(context.Background(), l, []outbox.RecordUpdate{{ID: a.ID, Take: true, Fn: outbox.Apply(func(r queue.Record) (queue.Record, error) { return queue.Charge(r, l, t0, time.Minute, time.Time{}) })}})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	b := h.enqueue(outbox.Op{OperationType: "title", OperationKey: "k", EntityID: "n", Payload: []byte("v2")})
	require.Equal(t, queue.ActionAppended, b.Action)
	require.Equal(t, "v1", string(h.get(a.ID).Payload))
	// A record that was handed to the transport once is never rewritten
	// (its key may be at the server with the old payload), even if waiting.
	h2 := newHarness(t, nil)
	h2.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 503}, nil }
	c := h2.enqueue(outbox.Op{OperationType: "title", OperationKey: "k", EntityID: "n", Payload: []byte("v1")})
	_, _ = h2.flush("A")
	require.Equal(t, queue.StatusFailed, h2.get(c.ID).Status)
	d := h2.enqueue(outbox.Op{OperationType: "title", OperationKey: "k", EntityID: "n", Payload: []byte("v2")})
	require.Equal(t, queue.ActionAppended, d.Action)
}

func TestReplaceDoesNotReorderEntity(t *testing.T) {
	h := newHarness(t, nil)
	h.enqueue(outbox.Op{OperationType: "title", OperationKey: "k", EntityID: "n", Payload: []byte("v1")})
	h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte("delete")})
	b := h.enqueue(outbox.Op{OperationType: "title", OperationKey: "k", EntityID: "n", Payload: []byte("v2")})
	require.Equal(t, queue.ActionAppended, b.Action)
}

func TestMerge(t *testing.T) {
	h := newHarness(t, nil)
	a := h.enqueue(outbox.Op{OperationType: "tags", OperationKey: "tags:n", EntityID: "n", Payload: []byte("a")})
	b := h.enqueue(outbox.Op{OperationType: "tags", OperationKey: "tags:n", EntityID: "n", Payload: []byte("b")})
	require.Equal(t, queue.ActionMerged, b.Action)
	require.Equal(t, "a,b", string(h.get(a.ID).Payload))
	_, err := outbox.New(outbox.Config{Store: h.store, Transport: outbox.TransportFunc(nil), Policies: map[string]queue.Policy{"m": {Dedupe: queue.Merge}}})
	require.ErrorIs(t, err, queue.ErrInvalidRecord)
}

func TestDropIfExists(t *testing.T) {
	h := newHarness(t, nil)
	a := h.enqueue(outbox.Op{OperationType: "star", OperationKey: "star:n", EntityID: "n", Payload: []byte("1")})
	b := h.enqueue(outbox.Op{OperationType: "star", OperationKey: "star:n", EntityID: "n", Payload: []byte("1")})
	require.Equal(t, queue.ActionDropped, b.Action)
	require.Equal(t, a.ID, b.ID)
	_, err := h.flush("A")
	require.NoError(t, err)
	c := h.enqueue(outbox.Op{OperationType: "star", OperationKey: "star:n", EntityID: "n", Payload: []byte("1")})
	require.Equal(t, queue.ActionAppended, c.Action) // the first one is acked: a new intent
}

func TestLargePayloadGoesToBlobStore(t *testing.T) {
	h := newHarness(t, func(c *outbox.Config) { c.InlineLimit = 8 })
	big := []byte("0123456789abcdef")
	a := h.enqueue(outbox.Op{OperationType: "title", OperationKey: "k", EntityID: "n", Payload: big})
	r := h.get(a.ID)
	require.Equal(t, "blob:"+a.ID, r.PayloadRef)
	require.Len(t, r.Payload, 0)
	require.Equal(t, queue.HashPayload(big), r.PayloadHash)
	// replacing with a small payload moves it inline and drops the blob
	h.enqueue(outbox.Op{OperationType: "title", OperationKey: "k", EntityID: "n", Payload: []byte("s")})
	_, err := h.store.Payload(context.Background(), "blob:"+a.ID)
	require.ErrorIs(t, err, outbox.ErrNotFound)
	h.enqueue(outbox.Op{OperationType: "title", OperationKey: "k", EntityID: "n", Payload: big})
	_, err = h.flush("A")
	require.NoError(t, err)
	require.Equal(t, string(big), string(h.sent()[0].Body))
}
