package sim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/memstore"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// A payload is bytes: the JS API takes a Uint8Array as the request body as
// is, so a record's payload need not be UTF-8. Sent in a batch, the
// receiver must see the very bytes it sees when the record is sent alone:
// else the effect is not the record's, and a record whose first answer
// was lost and that is resent in a batch is refused as a reused key.
// (The batch format cannot carry bytes that are not UTF-8 as they are
// (wire.BatchSafe): such a record goes alone.)

type bytesWorld struct {
	srv   *Server
	store *memstore.Store
	ob    *outbox.Outbox
	now   time.Time
}

func (b *bytesWorld) Now() time.Time { return b.now }

func newBytesWorld(t *testing.T, batch bool) *bytesWorld {
	t.Helper()
	b := &bytesWorld{srv: NewServer(), store: memstore.New(), now: epoch}
	cfg := outbox.Config{Name: "bytes", Store: b.store, Clock: b,
		Policies: map[string]queue.Policy{"put": {Dedupe: queue.Append}},
		Transport: outbox.TransportFunc(func(_ context.Context, req outbox.Request) (outbox.Response, error) {
			return b.srv.Handle(b.now, "u1", req), nil
		}),
		Concurrency: 1, MaxAttempts: 5,
		Backoff: &outbox.Backoff{Base: time.Millisecond, Cap: time.Millisecond},
	}
	if batch {
		cfg.BatchEndpoint = b.srv.BatchEndpoint
	}
	ob, err := outbox.New(cfg)
	require.NoError(t, err)
	_, err = ob.Login(context.Background(), outbox.Session{UserID: "u1"})
	require.NoError(t, err)
	b.ob = ob
	return b
}

func (b *bytesWorld) flush(t *testing.T) {
	ctx := context.Background()
	b.now = b.now.Add(time.Minute)
	lease, err := b.ob.Acquire(ctx, "tab", true)
	require.NoError(t, err)
	lease.Resource, lease.FenceToken = resource, b.srv.Issue(resource)
	_, _ = b.ob.Flush(ctx, lease)
}

func TestBatchCarriesPayloadBytes(t *testing.T) {
	ctx := context.Background()
	for _, p := range []string{"plain", `{"a": [1, 2.5e3, null]}`, `"a JSON string"`, "tab\tand \"quotes\"\n€", "not UTF-8: \xff\xfe"} {
		b := newBytesWorld(t, true)
		res, err := b.ob.Enqueue(ctx, outbox.Op{OperationType: "put", EntityType: "note", EntityID: "n1", Payload: []byte(p)})
		require.NoError(t, err)
		b.flush(t)
		r, err := b.store.Get(ctx, res.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatusAcked, r.Status, "%q", p)
		require.Len(t, b.srv.Effects, 1, "%q", p)
		require.Equal(t, queue.HashPayload([]byte(p)), b.srv.Effects[0].Hash, "payload %q: the receiver applied other bytes", p)
	}
}

func TestRecordSentAloneThenInBatchKeepsItsBytes(t *testing.T) {
	ctx := context.Background()
	for _, p := range []string{"plain", "not UTF-8: \xff\xfe"} {
		b := newBytesWorld(t, true)
		res, err := b.ob.Enqueue(ctx, outbox.Op{OperationType: "put", EntityType: "note", EntityID: "n1", Payload: []byte(p)})
		require.NoError(t, err)
		r, err := b.store.Get(ctx, res.ID)
		require.NoError(t, err)
		// Sent alone first (by a tab of a build without the batch
		// endpoint, or before a fallback), its answer lost...
		tok := b.srv.Issue(resource)
		single := outbox.Request{Method: "POST", Endpoint: "/api/commands", Body: []byte(p), RecordID: r.ID, Header: outbox.Header{
			wire.HeaderIdempotencyKey: wire.FormatIdempotencyKey(r.IdempotencyKey), wire.HeaderResource: resource,
			wire.HeaderFencingToken: wire.FormatToken(tok)}}
		require.Equal(t, 201, b.srv.Handle(b.now, "u1", single).Status)
		// ...then resent in a batch: replayed, one effect.
		b.flush(t)
		r, err = b.store.Get(ctx, res.ID)
		require.NoError(t, err)
		require.Equal(t, queue.StatusAcked, r.Status, "payload %q: %+v", p, r.LastError)
		require.Len(t, b.srv.Effects, 1)
	}
}
