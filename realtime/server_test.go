package realtime_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/realtime"
	"github.com/tabfence/tabfence/receiver"
	server "github.com/tabfence/tabfence/receiver/realtime"
	"github.com/tabfence/tabfence/receiver/realtime/realtimetest"
	"github.com/tabfence/tabfence/receiver/sqlitestore"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// wsSocket adapts coder/websocket's native client to realtime.Socket.
type wsSocket struct{ c *websocket.Conn }

func (s wsSocket) Send(ctx context.Context, b []byte) error {
	return s.c.Write(ctx, websocket.MessageBinary, b)
}

func (s wsSocket) Recv(ctx context.Context) ([]byte, error) {
	_, b, err := s.c.Read(ctx)
	return b, err
}

func (s wsSocket) Close(reason string) {
	go func() { _ = s.c.Close(websocket.StatusNormalClosure, reason) }()
}
func (s wsSocket) CloseCode(err error) int { return int(websocket.CloseStatus(err)) }

func dialer(url, user string) realtime.Dialer {
	return func(ctx context.Context) (realtime.Socket, error) {
		c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"X-User": {user}}})
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			return nil, errors.Join(realtime.ErrUnauthorized, err)
		}
		if err != nil {
			return nil, err
		}
		return wsSocket{c}, nil
	}
}

// notesServer is receiver/realtime over SQLite: a mutation inserts a note
// and publishes its payload; users authenticate with X-User.
func notesServer(t *testing.T) (url string, srv *server.Server, count func() int) {
	store, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "n.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	n := realtimetest.Serve(t, store, server.NewMemFeed(0), func(r *http.Request) (string, error) {
		if u := r.Header.Get("X-User"); u != "" {
			return u, nil
		}
		return "", receiver.ErrUnauthenticated
	})
	return n.URL, n.Server, n.Count
}

// tab records what a driver hands its app.
type tab struct {
	mu     sync.Mutex
	state  realtime.State
	deltas []rt.Delta
}

func (tb *tab) app(a realtime.Action) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	switch v := a.(type) {
	case realtime.StateChanged:
		tb.state = v.State
	case realtime.Deliver:
		tb.deltas = append(tb.deltas, v.Delta)
	}
}

func (tb *tab) get() (realtime.State, []rt.Delta) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.state, append([]rt.Delta(nil), tb.deltas...)
}

func start(t *testing.T, url, user string, pending *realtime.Pending) (*realtime.Driver, *tab, context.CancelFunc) {
	tb := &tab{}
	l := realtime.NewLeader(realtime.Config{PongTimeout: 5 * time.Second}, 0, pending)
	drv := realtime.NewDriver(l, dialer(url, user), nil, tb.app)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { drv.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return drv, tb, cancel
}

func wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, what)
}

func outcome(t *testing.T, ch <-chan realtime.Outcome) realtime.Outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("no outcome")
		return realtime.Outcome{}
	}
}

// The client core against the real endpoint: a leader connects, its
// mutation is applied and delivered; the next leader, restored with a
// mutation the first one sent but whose answer it never saw, resends it
// after ready and gets the stored ack; the server applied it once.
func TestClientCoreAgainstServer(t *testing.T) {
	url, srv, notes := notesServer(t)
	ctx := context.Background()
	first, tabA, stopA := start(t, url, "u1", nil)
	wait(t, "ready", func() bool { s, _ := tabA.get(); return s == realtime.Ready })
	o := outcome(t, first.Mutate(ctx, rt.Mutation{ID: "m1", Op: "create", Entity: "note", Payload: []byte("one")}))
	require.NotNil(t, o.Ack)
	require.False(t, o.Ack.Replayed)
	wait(t, "delta delivered", func() bool { _, ds := tabA.get(); return len(ds) == 1 })
	stopA()

	restored := realtime.NewPending()
	resent := restored.Add(rt.Mutation{ID: "m1", Op: "create", Entity: "note", Payload: []byte("one")}, time.Now())
	next, tabB, _ := start(t, url, "u1", restored)
	o = outcome(t, resent)
	require.NotNil(t, o.Ack, "resent after ready and settled")
	require.True(t, o.Ack.Replayed, "the stored answer")
	require.Equal(t, 1, notes(), "applied once")
	o = outcome(t, next.Mutate(ctx, rt.Mutation{ID: "m2", Op: "create", Entity: "note", Payload: []byte("two")}))
	require.NotNil(t, o.Ack)
	_, err := srv.Publish(ctx, "u1", []byte("three"))
	require.NoError(t, err)
	wait(t, "the new leader gets every delta in order", func() bool {
		_, ds := tabB.get()
		return len(ds) == 3 && ds[0].Version == 1 && ds[2].Version == 3 && string(ds[2].Changes) == "three"
	})
	require.Equal(t, 2, notes())

	_, tabC, _ := start(t, url, "", nil)
	wait(t, "unauthorized", func() bool { s, _ := tabC.get(); return s == realtime.Unauthorized })
}

// A server going away (1001) makes the leader reconnect with backoff; it is
// offline, not unauthorized.
func TestClientCoreGoesOfflineWhenServerLeaves(t *testing.T) {
	url, srv, _ := notesServer(t)
	_, tb, _ := start(t, url, "u1", nil)
	wait(t, "ready", func() bool { s, _ := tb.get(); return s == realtime.Ready })
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, srv.Shutdown(sctx))
	wait(t, "offline or reconnecting", func() bool {
		s, _ := tb.get()
		return s == realtime.Offline || s == realtime.Connecting
	})
}
