package queue_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox/queue"
)

func TestNames(t *testing.T) {
	n, err := queue.Names("notes", 1)
	require.NoError(t, err)
	// Protocol 1 is the queue as it was before protocols: same database.
	require.Equal(t, queue.QueueNames{Lock: "tabfence:outbox-notes:v1", Database: "tabfence-outbox:notes", Lease: "outbox-flush:v1:notes"}, n)
	n, err = queue.Names("notes", 4)
	require.NoError(t, err)
	require.Equal(t, queue.QueueNames{Lock: "tabfence:outbox-notes:v4", Database: "tabfence:outbox-notes:v4", Lease: "outbox-flush:v4:notes"}, n)
	_, err = queue.Names("notes", 0)
	require.Error(t, err)
	_, err = queue.Names("", 2)
	require.Error(t, err)
}

// Owners of two protocols never share a fencing resource, whatever the
// queue names hold; protocol 1's is the one existing users have.
func TestFenceResourceAcrossProtocols(t *testing.T) {
	require.Equal(t, "outbox:notes:alice@x.org", queue.FenceResource("notes", 1, "alice@x.org"))
	require.Equal(t, "outbox:n_1:bob_smith", queue.FenceResource("n 1", 1, "bob smith"))
	require.Equal(t, "outbox:notes:alice", queue.FenceResource("notes", 1, "alice"))
	require.Equal(t, "outbox:x:v2:alice", queue.FenceResource("x:v2", 1, "alice"))
	names := []string{"x", "x:v2", "x:v3", "x:v2:v3", "x:v12", "x:v1", "outbox-v2:x", "x:v2:alice", "v2", ":v2", "x/v2"}
	protocols := []int{1, 2, 3, 12}
	seen := map[string]string{}
	for _, n := range names {
		for _, p := range protocols {
			res := queue.FenceResource(n, p, "alice")
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
	g := queue.SchemaGate{Version: 3, Since: since, Migrations: []queue.Migration{{From: 1, To: 2}, {From: 2, To: 3}}}
	failed := func(at time.Time) *queue.ErrorInfo {
		return &queue.ErrorInfo{Code: queue.CodeSchemaUnsupported, At: at}
	}
	for _, c := range []struct {
		name string
		ver  int
		st   queue.Status
		err  *queue.ErrorInfo
		want queue.SchemaAction
	}{
		{"own schema", 3, queue.StatusPending, nil, queue.SchemaSend},
		{"older with a path", 1, queue.StatusPending, nil, queue.SchemaMigrate},
		{"older, failed before this runtime started", 2, queue.StatusPending, failed(since.Add(-time.Second)), queue.SchemaMigrate},
		{"older, failed in this runtime", 2, queue.StatusPending, failed(since), queue.SchemaUnsupported},
		{"own schema, a migration had failed", 3, queue.StatusPending, failed(since), queue.SchemaSend},
		{"no version is schema 1", 0, queue.StatusPending, nil, queue.SchemaMigrate},
		{"newer", 4, queue.StatusFailed, nil, queue.SchemaUnsupported},
	} {
		r := queue.Record{PayloadSchemaVersion: c.ver, Status: c.st, LastError: c.err}
		require.Equal(t, c.want, g.Action(&r), c.name)
		require.Equal(t, c.want == queue.SchemaUnsupported, g.Unsupported(&r), c.name)
	}
	// Settled records are history, not unsupported; no gate sends all.
	require.False(t, g.Unsupported(&queue.Record{PayloadSchemaVersion: 9, Status: queue.StatusAcked}))
	require.Equal(t, queue.SchemaSend, queue.SchemaGate{}.Action(&queue.Record{PayloadSchemaVersion: 9}))
	// A path must reach the version exactly, one step at a time.
	require.Equal(t, queue.SchemaUnsupported, queue.SchemaGate{Version: 3, Migrations: []queue.Migration{{From: 2, To: 3}}}.Action(&queue.Record{PayloadSchemaVersion: 1}))
	require.Equal(t, queue.SchemaUnsupported, queue.SchemaGate{Version: 3, Migrations: []queue.Migration{{From: 1, To: 2}}}.Action(&queue.Record{PayloadSchemaVersion: 1}))
}
