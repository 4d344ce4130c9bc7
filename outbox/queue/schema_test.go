package queue_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox"
)

func TestNames(t *testing.T) {
	n, err := outbox.Names("notes", 1)
	require.NoError(t, err)
	// Protocol 1 is the queue as it was before protocols: same database.
	require.Equal(t, outbox.QueueNames{Lock: "tabfence:outbox-notes:v1", Database: "tabfence-outbox:notes", Lease: "outbox-flush:v1:notes"}, n)
	n, err = outbox.Names("notes", 4)
	require.NoError(t, err)
	require.Equal(t, outbox.QueueNames{Lock: "tabfence:outbox-notes:v4", Database: "tabfence:outbox-notes:v4", Lease: "outbox-flush:v4:notes"}, n)
	_, err = outbox.Names("notes", 0)
	require.Error(t, err)
	_, err = outbox.Names("", 2)
	require.Error(t, err)
}

// Owners of two protocols never share a fencing resource, whatever the
// queue names hold; protocol 1's is the one existing users have.
func TestFenceResourceAcrossProtocols(t *testing.T) {
	require.Equal(t, "outbox:notes:alice@x.org", outbox.FenceResource("notes", 1, "alice@x.org"))
	require.Equal(t, "outbox:n_1:bob_smith", outbox.FenceResource("n 1", 1, "bob smith"))
	require.Equal(t, "outbox:notes:alice", outbox.FenceResource("notes", 1, "alice"))
	require.Equal(t, "outbox:x:v2:alice", outbox.FenceResource("x:v2", 1, "alice"))
	names := []string{"x", "x:v2", "x:v3", "x:v2:v3", "x:v12", "x:v1", "outbox-v2:x", "x:v2:alice", "v2", ":v2", "x/v2"}
	protocols := []int{1, 2, 3, 12}
	seen := map[string]string{}
	for _, n := range names {
		for _, p := range protocols {
			res := outbox.FenceResource(n, p, "alice")
			who := n + " @" + strconv.Itoa(p)
			if prev, ok := seen[res]; ok {
				t.Fatalf("%s and %s share resource %q", prev, who, res)
			}
			seen[res] = who
		}
	}
}

func TestSchemaGate(t *testing.T) {
	since := t0
	g := outbox.SchemaGate{Version: 3, Since: since, Migrations: []outbox.Migration{{From: 1, To: 2}, {From: 2, To: 3}}}
	failed := func(at time.Time) *outbox.ErrorInfo {
		return &outbox.ErrorInfo{Code: outbox.CodeSchemaUnsupported, At: at}
	}
	for _, c := range []struct {
		name string
		ver  int
		st   outbox.Status
		err  *outbox.ErrorInfo
		want outbox.SchemaAction
	}{
		{"own schema", 3, outbox.StatusPending, nil, outbox.SchemaSend},
		{"older with a path", 1, outbox.StatusPending, nil, outbox.SchemaMigrate},
		{"older, failed before this runtime started", 2, outbox.StatusPending, failed(since.Add(-time.Second)), outbox.SchemaMigrate},
		{"older, failed in this runtime", 2, outbox.StatusPending, failed(since), outbox.SchemaUnsupported},
		{"own schema, a migration had failed", 3, outbox.StatusPending, failed(since), outbox.SchemaSend},
		{"no version is schema 1", 0, outbox.StatusPending, nil, outbox.SchemaMigrate},
		{"newer", 4, outbox.StatusFailed, nil, outbox.SchemaUnsupported},
	} {
		r := outbox.Record{PayloadSchemaVersion: c.ver, Status: c.st, LastError: c.err}
		require.Equal(t, c.want, g.Action(&r), c.name)
		require.Equal(t, c.want == outbox.SchemaUnsupported, g.Unsupported(&r), c.name)
	}
	// Settled records are history, not unsupported; no gate sends all.
	require.False(t, g.Unsupported(&outbox.Record{PayloadSchemaVersion: 9, Status: outbox.StatusAcked}))
	require.Equal(t, outbox.SchemaSend, outbox.SchemaGate{}.Action(&outbox.Record{PayloadSchemaVersion: 9}))
	// A path must reach the version exactly, one step at a time.
	require.Equal(t, outbox.SchemaUnsupported, outbox.SchemaGate{Version: 3, Migrations: []outbox.Migration{{From: 2, To: 3}}}.Action(&outbox.Record{PayloadSchemaVersion: 1}))
	require.Equal(t, outbox.SchemaUnsupported, outbox.SchemaGate{Version: 3, Migrations: []outbox.Migration{{From: 1, To: 2}}}.Action(&outbox.Record{PayloadSchemaVersion: 1}))
}

// A migration that fails leaves the record as stored, uncharged and
// visible as unsupported; this runtime does not try it again, a runtime
// started later does.
func TestFailedMigrationLeavesRecord(t *testing.T) {
	broken := true
	migs := []outbox.Migration{{From: 1, To: 2, Migrate: func(p []byte) ([]byte, error) {
		if broken {
			return nil, errors.New("boom")
		}
		return append(p, "+v2"...), nil
	}}}
	h := newHarness(t, func(c *outbox.Config) { c.SchemaVersion = 2; c.Migrations = migs })
	ctx := context.Background()
	_, err := h.store.Enqueue(ctx, outbox.EnqueueRequest{Policy: outbox.Policy{Dedupe: outbox.Append}, Record: outbox.Record{
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
	require.Equal(t, outbox.StatusPending, r.Status)
	require.Equal(t, 0, r.Attempts)
	require.Equal(t, 0, r.Sends)
	require.Equal(t, 1, r.PayloadSchemaVersion)
	require.Equal(t, "p", string(r.Payload))
	require.Equal(t, outbox.CodeSchemaUnsupported, r.LastError.Code)
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
	require.Equal(t, outbox.StatusAcked, h.get("old").Status)
	require.Equal(t, "p+v2", string(h.sent()[0].Body))
}
