package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// A migration that fails leaves the record as stored, uncharged and
// visible as unsupported; this runtime does not try it again, a runtime
// started later does.
func TestFailedMigrationLeavesRecord(t *testing.T) {
	broken := true
	migs := []queue.Migration{{From: 1, To: 2, Migrate: func(p []byte) ([]byte, error) {
		if broken {
			return nil, errors.New("boom")
		}
		return append(p, "+v2"...), nil
	}}}
	h := newHarness(t, func(c *outbox.Config) { c.SchemaVersion = 2; c.Migrations = migs })
	ctx := context.Background()
	_, err := h.store.Enqueue(ctx, queue.EnqueueRequest{Policy: queue.Policy{Dedupe: queue.Append}, Record: queue.Record{
		ID: "old", IdempotencyKey: "kold", EntityID: "e", OperationType: "comment", Payload: []byte("p"),
		PayloadSchemaVersion: 1, UserID: "alice", TenantID: "t1", MaxAttempts: 5, CreatedAt: t0, NextAttemptAt: t0,
	}})
	require.NoError(t, err)
	h.clock.Add(time.Second)
	for i := 0; i < 3; i++ {
		_, err = h.flush("A")
		require.NoError(t, err)
		h.clock.Add(time.Minute)
	}
	require.Len(t, h.sent(), 0)
	r := h.get("old")
	require.Equal(t, queue.StatusPending, r.Status)
	require.Equal(t, 0, r.Attempts)
	require.Equal(t, 0, r.Sends)
	require.Equal(t, 1, r.PayloadSchemaVersion)
	require.Equal(t, "p", string(r.Payload))
	require.Equal(t, queue.CodeSchemaUnsupported, r.LastError.Code)
	p, err := h.ob.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, p.Unsupported)
	var unsupported int
	for _, e := range h.events {
		if e.Kind == outbox.EventUnsupported {
			unsupported++
		}
	}
	require.Equal(t, 1, unsupported, "tried once in this runtime")

	// A later build with a working migration sends it.
	broken = false
	cfg := *h.ob.ConfigForTest()
	ob2, err := outbox.New(cfg)
	require.NoError(t, err)
	_, err = ob2.Login(context.Background(), h.ob.Session())
	require.NoError(t, err)
	h.ob = ob2
	_, err = h.flush("B")
	require.NoError(t, err)
	require.Equal(t, queue.StatusAcked, h.get("old").Status)
	require.Equal(t, "p+v2", string(h.sent()[0].Body))
}
