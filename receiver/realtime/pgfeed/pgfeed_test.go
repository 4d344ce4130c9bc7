package pgfeed_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver/pgstore"
	"github.com/tabfence/tabfence/receiver/pgstore/pgtest"
	"github.com/tabfence/tabfence/receiver/realtime/pgfeed"
	"github.com/tabfence/tabfence/receiver/realtime/realtimetest"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// instance is one server process: its own store connections, feed
// listener and endpoint, on the shared database.
func instance(t *testing.T, url, channel string) (wsURL string, count func() int) {
	ctx := context.Background()
	store, err := pgstore.Open(ctx, url, 4)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	feed, err := pgfeed.Open(ctx, store, url, pgfeed.Options{Channel: channel})
	require.NoError(t, err)
	t.Cleanup(func() { _ = feed.Close() })
	n := realtimetest.Serve(t, store, feed, func(r *http.Request) (string, error) { return r.Header.Get("X-User"), nil })
	return n.URL, n.Count
}

func dial(t *testing.T, url string) *websocket.Conn {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"X-User": {"u1"}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.CloseNow() })
	require.NoError(t, c.Write(ctx, websocket.MessageBinary, rt.Encode(rt.Hello{Protocol: rt.Protocol})))
	_, b, err := c.Read(ctx)
	require.NoError(t, err)
	m, err := rt.Decode(b, 0)
	require.NoError(t, err)
	require.IsType(t, rt.Ready{}, m)
	require.False(t, m.(rt.Ready).Reset)
	return c
}

// Two instances on one PostgreSQL: mutations sent to either, at once, reach
// the clients of both as one stream, every delta once and in order.
func TestTwoInstancesShareTheStream(t *testing.T) {
	url := pgtest.SchemaURL(t)
	channel := "tf_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	urlA, notes := instance(t, url, channel)
	urlB, _ := instance(t, url, channel)
	a, b := dial(t, urlA), dial(t, urlB)
	const n = 10
	var wg sync.WaitGroup
	for i, c := range []*websocket.Conn{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < n; j++ {
				m := rt.Mutation{ID: "m" + strconv.Itoa(i) + "-" + strconv.Itoa(j), Op: "create", Entity: "note", Payload: []byte(strconv.Itoa(i*100 + j))}
				_ = c.Write(context.Background(), websocket.MessageBinary, rt.Encode(m))
			}
		}()
	}
	wg.Wait()
	for name, c := range map[string]*websocket.Conn{"A": a, "B": b} {
		seen := map[string]bool{}
		acks := 0
		next := uint64(1)
		for next <= 2*n || acks < n {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, raw, err := c.Read(ctx)
			cancel()
			require.NoError(t, err, "client on %s: delta %d, acks %d", name, next, acks)
			m, err := rt.Decode(raw, 0)
			require.NoError(t, err)
			switch v := m.(type) {
			case rt.Delta:
				require.Equal(t, next, v.Version, "client on %s: in order", name)
				require.Equal(t, next-1, v.Prev)
				require.False(t, seen[string(v.Changes)], "once")
				seen[string(v.Changes)] = true
				next++
			case rt.Ack:
				acks++
			default:
				t.Fatalf("client on %s: unexpected %#v", name, m)
			}
		}
		require.Len(t, seen, 2*n)
	}
	require.Equal(t, 2*n, notes())

	late := dial(t, urlB) // hello at 0: the backlog comes from the rows
	for v := uint64(1); v <= 2*n; v++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, raw, err := late.Read(ctx)
		cancel()
		require.NoError(t, err)
		m, err := rt.Decode(raw, 0)
		require.NoError(t, err)
		require.Equal(t, v, m.(rt.Delta).Version, "a late client catches up in order")
	}
}

// The reaper's SQL runs on PostgreSQL too: rows past Keep go, and a
// client behind them is told to reset.
func TestReapOnPostgres(t *testing.T) {
	ctx := context.Background()
	url := pgtest.SchemaURL(t)
	store, err := pgstore.Open(ctx, url, 2)
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	feed, err := pgfeed.Open(ctx, store, url, pgfeed.Options{Keep: 3, Channel: "tf_reap"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = feed.Close() })
	for i := 0; i < 10; i++ {
		_, err := feed.Publish(ctx, "u1", []byte{byte(i)})
		require.NoError(t, err)
	}
	n, err := feed.Reap(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(7), n)
	sub, err := feed.Subscribe(ctx, "u1", 6, 4)
	require.NoError(t, err)
	sub.Cancel()
	require.True(t, sub.Reset)
	sub, err = feed.Subscribe(ctx, "u1", 7, 4)
	require.NoError(t, err)
	sub.Cancel()
	require.False(t, sub.Reset)
	require.Len(t, sub.Backlog, 3)
}
