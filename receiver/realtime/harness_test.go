package realtime_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/realtime"
	"github.com/tabfence/tabfence/receiver/sqlitestore"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// env is one server over SQLite: users authenticate with X-User (the
// test's stand-in for a session cookie); a "create note" mutation inserts
// its payload and publishes it as the delta.
type env struct {
	t     testing.TB
	rc    *receiver.Receiver
	store receiver.Store
	srv   *realtime.Server
	feed  realtime.Feed
	url   string
}

func newEnv(t testing.TB, opts realtime.Options) *env {
	return newEnvWith(t, opts, nil, nil)
}

// newStore opens a SQLite store with the notes table.
func newStore(t testing.TB) receiver.Store {
	t.Helper()
	ctx := context.Background()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "rt.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	tx, err := store.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `CREATE TABLE notes (scope TEXT NOT NULL, body TEXT NOT NULL)`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	return store
}

func insertNote(ctx context.Context, tx receiver.Tx, r *realtime.Request) (realtime.Result, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO notes (scope, body) VALUES ($1, $2)`, r.Scope, string(r.Payload)); err != nil {
		return realtime.Result{}, err
	}
	return realtime.Result{Response: receiver.Response{Status: 201, Body: []byte(`{"ok":true}`)}, Changes: r.Payload}, nil
}

// newEnvWith serves h (default insertNote) on the feed mk makes over the
// env's store (default a MemFeed).
func newEnvWith(t testing.TB, opts realtime.Options, mk func(receiver.Store) realtime.Feed, h realtime.Handler) *env {
	t.Helper()
	store := newStore(t)
	rc := receiver.New(store, receiver.Options{Scope: func(r *http.Request) (string, error) {
		if u := r.Header.Get("X-User"); u != "" {
			return u, nil
		}
		return "", receiver.ErrUnauthenticated
	}})
	var feed realtime.Feed = realtime.NewMemFeed(0)
	if mk != nil {
		feed = mk(store)
	}
	if h == nil {
		h = insertNote
	}
	srv := realtime.New(rc, feed, h, opts)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		hs.Close()
	})
	return &env{t: t, rc: rc, store: store, srv: srv, feed: feed, url: "ws" + strings.TrimPrefix(hs.URL, "http")}
}

func (e *env) notes(scope string) int {
	var n int64
	require.NoError(e.t, e.store.View(context.Background(), func(q receiver.Tx) error {
		return q.QueryRow(context.Background(), `SELECT COUNT(*) FROM notes WHERE scope = $1`, scope).Scan(&n)
	}))
	return int(n)
}

// client is a raw test connection.
type client struct {
	t testing.TB
	c *websocket.Conn
}

func (e *env) dial(user string) *client {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, e.url, &websocket.DialOptions{HTTPHeader: http.Header{"X-User": {user}}})
	require.NoError(e.t, err)
	c.SetReadLimit(4 << 20)
	e.t.Cleanup(func() { _ = c.CloseNow() })
	return &client{t: e.t, c: c}
}

func (c *client) send(m rt.Message) { c.sendRaw(rt.Encode(m)) }

func (c *client) sendRaw(b []byte) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(c.t, c.c.Write(ctx, websocket.MessageBinary, b))
}

func (c *client) recv() (rt.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, b, err := c.c.Read(ctx)
	if err != nil {
		return nil, err
	}
	return rt.Decode(b, 0)
}

func (c *client) must() rt.Message {
	c.t.Helper()
	m, err := c.recv()
	require.NoError(c.t, err)
	return m
}

// hello opens the session and returns the server's ready.
func (c *client) hello(version uint64) rt.Ready {
	c.t.Helper()
	c.send(rt.Hello{Protocol: rt.Protocol, Version: version})
	m := c.must()
	r, ok := m.(rt.Ready)
	require.True(c.t, ok, "want ready, got %#v", m)
	return r
}

// closeCode reads until the connection ends and returns its close status.
func (c *client) closeCode() websocket.StatusCode {
	c.t.Helper()
	for {
		_, err := c.recv()
		if err != nil {
			if s := websocket.CloseStatus(err); s != -1 {
				return s
			}
			if strings.Contains(err.Error(), "realtime:") {
				continue // a message that does not decode on our side is not the end
			}
			c.t.Logf("connection ended: %v", err)
			return -1
		}
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, what)
}
