package receiver_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/sqlitestore"
	"github.com/tabfence/tabfence/wire"
)

// Apply gives a command that is not its own HTTP request the receiver's
// guarantees: one effect per key, a replay marked as such, fencing.
func TestApplyOncePerKeyAndFenced(t *testing.T) {
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "a.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	rc := receiver.New(store, receiver.Options{})
	var runs atomic.Int64
	h := func(ctx context.Context, tx receiver.Tx, r *receiver.Request) (receiver.Response, error) {
		runs.Add(1)
		return receiver.Response{Status: http.StatusCreated, Body: []byte("made")}, nil
	}
	m := receiver.Mutation{Scope: "u1", Key: "k1", Target: "create note", Body: []byte("{}")}
	first := rc.Apply(ctx, m, h)
	again := rc.Apply(ctx, m, h)
	require.Equal(t, 201, first.Status)
	require.Equal(t, 201, again.Status)
	require.Equal(t, "true", again.Header.Get(wire.HeaderReplayed))
	require.Equal(t, "made", string(again.Body))
	require.Equal(t, int64(1), runs.Load())

	m.Target = "delete note"
	require.Equal(t, 422, rc.Apply(ctx, m, h).Status, "a key reused for another command")

	tok1, err := rc.IssueToken(ctx, "u1", "leader")
	require.NoError(t, err)
	tok2, err := rc.IssueToken(ctx, "u1", "leader")
	require.NoError(t, err)
	fenced := receiver.Mutation{Scope: "u1", Key: "k2", Target: "t", Resource: "leader", Token: tok2}
	require.Equal(t, 201, rc.Apply(ctx, fenced, h).Status)
	fenced.Key, fenced.Token = "k3", tok1
	stale := rc.Apply(ctx, fenced, h)
	require.Equal(t, 409, stale.Status)
	require.Equal(t, wire.FormatToken(tok2), stale.Header.Get(wire.HeaderFencingHighest))
	require.Equal(t, int64(2), runs.Load(), "the stale command did not run")

	require.Equal(t, 401, rc.Apply(ctx, receiver.Mutation{Key: "k"}, h).Status)
	require.Equal(t, 400, rc.Apply(ctx, receiver.Mutation{Scope: "u1", Key: `a"b`}, h).Status)
	require.Equal(t, 400, rc.Apply(ctx, receiver.Mutation{Scope: "u1", Key: "k4", Token: 1}, h).Status)
}
