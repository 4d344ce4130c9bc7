// Package realtimetest serves receiver/realtime for tests: an endpoint over
// a given store and feed whose mutations insert a note and publish its
// payload, so a test can count what the server applied.
package realtimetest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/realtime"
)

// Notes is a running endpoint: URL (ws://…), its Server, and Count, the
// notes stored so far.
type Notes struct {
	URL    string
	Server *realtime.Server
	Count  func() int
}

// Serve creates the notes table (if missing) in store and serves the
// endpoint on feed, users authenticated by scope, until the test ends.
func Serve(t testing.TB, store receiver.Store, feed realtime.Feed, scope func(*http.Request) (string, error)) Notes {
	t.Helper()
	ctx := context.Background()
	tx, err := store.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS notes (body TEXT NOT NULL)`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	rc := receiver.New(store, receiver.Options{Scope: scope})
	srv := realtime.New(rc, feed, func(ctx context.Context, tx receiver.Tx, r *realtime.Request) (realtime.Result, error) {
		_, err := tx.Exec(ctx, `INSERT INTO notes (body) VALUES ($1)`, string(r.Payload))
		return realtime.Result{Response: receiver.Response{Status: 201}, Changes: r.Payload}, err
	}, realtime.Options{})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		hs.Close()
	})
	count := func() int {
		var n int64
		require.NoError(t, store.View(ctx, func(q receiver.Tx) error {
			return q.QueryRow(ctx, `SELECT COUNT(*) FROM notes`).Scan(&n)
		}))
		return int(n)
	}
	return Notes{URL: "ws" + strings.TrimPrefix(hs.URL, "http"), Server: srv, Count: count}
}
