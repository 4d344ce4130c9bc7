package realtime_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// benchFeeds: what a delta and a mutation cost on each feed, over a real
// WebSocket on loopback and SQLite.
func benchFeeds(b *testing.B) map[string]func(receiver.Store) realtime.Feed {
	return map[string]func(receiver.Store) realtime.Feed{
		"mem": func(receiver.Store) realtime.Feed { return realtime.NewMemFeed(0) },
		"store": func(store receiver.Store) realtime.Feed {
			f, err := realtime.OpenStoreFeed(context.Background(), store, realtime.StoreOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = f.Close() })
			return f
		},
	}
}

// BenchmarkPublishToClient: Server.Publish until the client has the delta.
func BenchmarkPublishToClient(b *testing.B) {
	for name, mk := range benchFeeds(b) {
		b.Run(name, func(b *testing.B) {
			e := newEnvWith(b, realtime.Options{}, mk, nil)
			c := e.dial("u1")
			c.hello(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := e.srv.Publish(context.Background(), "u1", []byte("d")); err != nil {
					b.Fatal(err)
				}
				if _, err := c.recv(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMutationToAck: a mutation sent until its ack (its delta first).
func BenchmarkMutationToAck(b *testing.B) {
	for name, mk := range benchFeeds(b) {
		b.Run(name, func(b *testing.B) {
			e := newEnvWith(b, realtime.Options{}, mk, nil)
			c := e.dial("u1")
			c.hello(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.send(rt.Mutation{ID: "m" + strconv.Itoa(i), Op: "create", Entity: "note", Payload: []byte("x")})
				for {
					m, err := c.recv()
					if err != nil {
						b.Fatal(err)
					}
					if _, ok := m.(rt.Ack); ok {
						break
					}
				}
			}
		})
	}
}
