package realtime_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

func storeFeed(t *testing.T, opts realtime.StoreOptions) func(receiver.Store) realtime.Feed {
	return func(store receiver.Store) realtime.Feed {
		f, err := realtime.OpenStoreFeed(context.Background(), store, opts)
		require.NoError(t, err)
		t.Cleanup(func() { _ = f.Close() })
		return f
	}
}

// feeds are the two feeds a server runs on, for tests that hold for both.
func feeds(t *testing.T) map[string]func(receiver.Store) realtime.Feed {
	return map[string]func(receiver.Store) realtime.Feed{
		"mem":   func(receiver.Store) realtime.Feed { return realtime.NewMemFeed(0) },
		"store": storeFeed(t, realtime.StoreOptions{}),
	}
}

// countNote inserts a note and publishes its ordinal in commit order (the
// store has one writer: the count inside the transaction is that order).
func countNote(ctx context.Context, tx receiver.Tx, r *realtime.Request) (realtime.Result, error) {
	var n int64
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM notes WHERE scope = $1`, r.Scope).Scan(&n); err != nil {
		return realtime.Result{}, err
	}
	res, err := insertNote(ctx, tx, r)
	res.Changes = []byte(strconv.FormatInt(n+1, 10))
	res.Response.Body = res.Changes
	return res, err
}

// Mutations of one scope from several connections at once: version v is
// the v-th commit, for every client, on either feed; and the connection
// that sent a mutation gets its delta before its ack (a tab that drops its
// optimistic copy on the ack finds the server's in the replica).
func TestConcurrentMutationsGetVersionsInCommitOrder(t *testing.T) {
	for name, mk := range feeds(t) {
		t.Run(name, func(t *testing.T) {
			e := newEnvWith(t, realtime.Options{}, mk, countNote)
			watcher := e.dial("u1")
			watcher.hello(0)
			const senders, each = 16, 40
			var wg sync.WaitGroup
			var acks atomic.Int64
			var ackFirst atomic.Value
			for i := 0; i < senders; i++ {
				c := e.dial("u1")
				c.hello(0)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := 0; j < each; j++ {
						c.send(rt.Mutation{ID: "m" + strconv.Itoa(i) + "-" + strconv.Itoa(j), Op: "create", Entity: "note", Payload: []byte("x")})
					}
					var seen uint64
					for got := 0; got < each; {
						m, err := c.recv()
						if err != nil {
							return
						}
						switch v := m.(type) {
						case rt.Delta:
							seen = v.Version
						case rt.Ack:
							got++
							acks.Add(1)
							if n, _ := strconv.ParseUint(string(v.Result), 10, 64); n > seen {
								ackFirst.Store("ack of version " + string(v.Result) + " before its delta")
							}
						}
					}
				}()
			}
			for v := uint64(1); v <= senders*each; v++ {
				d, ok := watcher.must().(rt.Delta)
				require.True(t, ok)
				require.Equal(t, v, d.Version)
				require.Equal(t, strconv.FormatUint(v, 10), string(d.Changes), "version %d is the %d-th commit", v, v)
			}
			wg.Wait()
			require.Equal(t, int64(senders*each), acks.Load())
			require.Nil(t, ackFirst.Load())
		})
	}
}

func TestHelloReadyAndCatchUpOnEitherFeed(t *testing.T) {
	for name, mk := range feeds(t) {
		t.Run(name, func(t *testing.T) {
			e := newEnvWith(t, realtime.Options{}, mk, nil)
			for i := 0; i < 3; i++ {
				_, err := e.srv.Publish(context.Background(), "u1", []byte("c"+strconv.Itoa(i)))
				require.NoError(t, err)
			}
			c := e.dial("u1")
			require.Equal(t, rt.Ready{Version: 3}, c.hello(1))
			require.Equal(t, rt.Delta{Version: 2, Prev: 1, Changes: []byte("c1")}, c.must())
			require.Equal(t, rt.Delta{Version: 3, Prev: 2, Changes: []byte("c2")}, c.must())
			require.Equal(t, rt.Ready{Version: 3, Reset: true}, e.dial("u1").hello(4), "ahead of the feed")
			require.Equal(t, rt.Ready{Version: 0}, e.dial("u2").hello(0))
		})
	}
}

// Change rows are reaped past Keep versions and past Retention; a client
// behind the oldest row kept is told to reset, one at or after it catches
// up from the rows.
func TestStoreFeedReapsAndResets(t *testing.T) {
	ctx := context.Background()
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	clock := func() time.Time { return time.UnixMilli(now.Load()) }
	var feed *realtime.StoreFeed
	mk := func(store receiver.Store) realtime.Feed {
		f := storeFeed(t, realtime.StoreOptions{Keep: 3, Retention: time.Hour, Clock: clock})(store)
		feed = f.(*realtime.StoreFeed)
		return f
	}
	e := newEnvWith(t, realtime.Options{}, mk, nil)
	for i := 1; i <= 10; i++ {
		_, err := e.srv.Publish(ctx, "u1", []byte("c"+strconv.Itoa(i)))
		require.NoError(t, err)
	}
	n, err := feed.Reap(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(7), n, "all but the last Keep")
	require.Equal(t, rt.Ready{Version: 10, Reset: true}, e.dial("u1").hello(5))
	c := e.dial("u1")
	require.Equal(t, rt.Ready{Version: 10}, c.hello(7))
	for v := uint64(8); v <= 10; v++ {
		require.Equal(t, v, c.must().(rt.Delta).Version)
	}

	now.Add(2 * time.Hour.Milliseconds())
	_, err = e.srv.Publish(ctx, "u1", []byte("c11"))
	require.NoError(t, err)
	require.Equal(t, uint64(11), c.must().(rt.Delta).Version)
	n, err = feed.Reap(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), n, "rows older than Retention")
	require.Equal(t, rt.Ready{Version: 11, Reset: true}, e.dial("u1").hello(9), "its next delta was reaped")
	c = e.dial("u1")
	require.Equal(t, rt.Ready{Version: 11}, c.hello(10))
	require.Equal(t, rt.Delta{Version: 11, Prev: 10, Changes: []byte("c11")}, c.must())
}

// A change committed whose fan-out never ran (the process died after the
// commit, or the notification was lost) reaches live clients at the next
// poll, and a feed started on the store later (a restart) keeps its
// versions: a client at the head is not told to reset.
func TestStoreFeedCatchesUpCommittedRows(t *testing.T) {
	ctx := context.Background()
	var feed *realtime.StoreFeed
	e := newEnvWith(t, realtime.Options{}, func(store receiver.Store) realtime.Feed {
		f := storeFeed(t, realtime.StoreOptions{Poll: 20 * time.Millisecond})(store)
		feed = f.(*realtime.StoreFeed)
		return f
	}, nil)
	c := e.dial("u1")
	c.hello(0)
	tx, err := e.store.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, feed.PublishTx(ctx, tx, "u1", []byte("orphan")))
	require.NoError(t, tx.Commit()) // and no Committed
	require.Equal(t, rt.Delta{Version: 1, Prev: 0, Changes: []byte("orphan")}, c.must())

	restarted, err := realtime.OpenStoreFeed(ctx, e.store, realtime.StoreOptions{})
	require.NoError(t, err)
	defer restarted.Close()
	sub, err := restarted.Subscribe(ctx, "u1", 0, 4)
	require.NoError(t, err)
	defer sub.Cancel()
	require.False(t, sub.Reset)
	require.Equal(t, uint64(1), sub.Version)
	require.Equal(t, []rt.Delta{{Version: 1, Prev: 0, Changes: []byte("orphan")}}, sub.Backlog)
}
