package realtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// chanSocket is a socket whose incoming messages the test hands over one
// at a time (unbuffered: a send returns once the driver's reader took it).
type chanSocket struct {
	in   chan []byte
	mu   sync.Mutex
	sent []rt.Message
}

func (s *chanSocket) Send(_ context.Context, b []byte) error {
	m, err := rt.Decode(b, 0)
	s.mu.Lock()
	s.sent = append(s.sent, m)
	s.mu.Unlock()
	return err
}

func (s *chanSocket) Recv(ctx context.Context) ([]byte, error) {
	select {
	case b := <-s.in:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *chanSocket) Close(string)        {}
func (s *chanSocket) CloseCode(error) int { return -1 }

func (s *chanSocket) said() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sent)
}

// Deltas that arrive while the app is busy with one reach it together, in
// order, in the next batch (so the browser writes them in one transaction);
// a lone delta is handed over at once.
func TestDriverBatchesWhatQueuedWhileTheAppWorked(t *testing.T) {
	s := &chanSocket{in: make(chan []byte)}
	busy, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var batches [][]uint64
	app := func(acts []realtime.Action) {
		var vs []uint64
		for _, a := range acts {
			if d, ok := a.(realtime.Deliver); ok {
				vs = append(vs, d.Delta.Version)
			}
		}
		if len(vs) == 0 {
			return
		}
		mu.Lock()
		batches = append(batches, vs)
		first := len(batches) == 1
		mu.Unlock()
		if first {
			close(busy)
			<-release // the app is writing v1 meanwhile
		}
	}
	l := realtime.NewLeader(realtime.Config{PongTimeout: time.Minute}, 0, nil)
	d := realtime.NewBatchDriver(l, func(context.Context) (realtime.Socket, error) { return s, nil }, nil, app)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	require.Eventually(t, func() bool { return s.said() == 1 }, 5*time.Second, time.Millisecond, "hello")
	delta := func(v uint64) []byte { return rt.Encode(rt.Delta{Version: v, Prev: v - 1, Changes: []byte("[]")}) }
	s.in <- rt.Encode(rt.Ready{})
	s.in <- delta(1)
	<-busy
	for v := uint64(2); v <= 6; v++ {
		s.in <- delta(v) // v6 taken: v2..v5 are queued for the driver
	}
	close(release)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, b := range batches {
			n += len(b)
		}
		return n == 6
	}, 5*time.Second, time.Millisecond, "every delta delivered")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []uint64{1}, batches[0], "a lone delta at once")
	require.GreaterOrEqual(t, len(batches[1]), 4)
	require.Equal(t, []uint64{2, 3, 4, 5}, batches[1][:4], "the queued deltas together, in order")
	var all []uint64
	for _, b := range batches {
		all = append(all, b...)
	}
	require.Equal(t, []uint64{1, 2, 3, 4, 5, 6}, all)
}

// A batch never holds an app action past a socket action: acks settled
// before a mutation is sent reach the app before the send.
func TestDriverKeepsOrderAroundSends(t *testing.T) {
	s := &chanSocket{in: make(chan []byte)}
	var mu sync.Mutex
	var log []string
	app := func(acts []realtime.Action) {
		mu.Lock()
		defer mu.Unlock()
		for _, a := range acts {
			if st, ok := a.(realtime.Settled); ok {
				log = append(log, "settled "+st.ID+" after "+string(rune('0'+s.said())))
			}
		}
	}
	p := realtime.NewPending()
	p.Add(rt.Mutation{ID: "a", Op: "x", Entity: "e"}, time.Now())
	l := realtime.NewLeader(realtime.Config{PongTimeout: time.Minute}, 0, p)
	d := realtime.NewBatchDriver(l, func(context.Context) (realtime.Socket, error) { return s, nil }, nil, app)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return s.said() == 1 }, 5*time.Second, time.Millisecond, "hello")
	s.in <- rt.Encode(rt.Ready{})
	require.Eventually(t, func() bool { return s.said() == 2 }, 5*time.Second, time.Millisecond, "resent")
	s.in <- rt.Encode(rt.Ack{ID: "a", Status: 200})
	s.in <- rt.Encode(rt.Pong{}) // taken: the ack is queued before b
	out := d.Mutate(ctx, rt.Mutation{ID: "b", Op: "x", Entity: "e"})
	require.NotNil(t, out)
	require.Eventually(t, func() bool { return s.said() == 3 }, 5*time.Second, time.Millisecond, "b sent")
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(log) == 1 }, 5*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"settled a after 2"}, log, "a's settle was handed over before b went out")
}

// A batch the app could not write (AppFailed with the version the replica
// holds) sends the leader back to that version: the socket is replaced and
// the next hello asks the server for what the replica lacks, although the
// machine had moved past it with the batch's deltas.
func TestDriverFailedBatchRedialsFromWhatTheReplicaHolds(t *testing.T) {
	s1, s2 := &chanSocket{in: make(chan []byte)}, &chanSocket{in: make(chan []byte)}
	var mu sync.Mutex
	dials := 0
	dial := func(context.Context) (realtime.Socket, error) {
		mu.Lock()
		defer mu.Unlock()
		dials++
		if dials == 1 {
			return s1, nil
		}
		return s2, nil
	}
	busy, release := make(chan struct{}), make(chan struct{})
	var held uint64
	var d *realtime.Driver
	app := func(acts []realtime.Action) {
		for _, a := range acts {
			dv, ok := a.(realtime.Deliver)
			if !ok {
				continue
			}
			switch v := dv.Delta.Version; {
			case v == 2:
				close(busy)
				<-release // v3..v5 queue meanwhile: one batch after this one
				held = 2
			case v >= 3:
				d.AppFailed(held) // the batch's transaction aborted: the replica holds v2
				return
			default:
				held = v
			}
		}
	}
	l := realtime.NewLeader(realtime.Config{PongTimeout: time.Minute, Backoff: &outbox.Backoff{Base: time.Millisecond, Cap: 5 * time.Millisecond}}, 0, nil)
	d = realtime.NewBatchDriver(l, dial, nil, app)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	require.Eventually(t, func() bool { return s1.said() == 1 }, 5*time.Second, time.Millisecond, "hello")
	delta := func(v uint64) []byte { return rt.Encode(rt.Delta{Version: v, Prev: v - 1, Changes: []byte("[]")}) }
	s1.in <- rt.Encode(rt.Ready{})
	s1.in <- delta(1)
	s1.in <- delta(2)
	<-busy
	for v := uint64(3); v <= 5; v++ {
		s1.in <- delta(v)
	}
	close(release)
	require.Eventually(t, func() bool { return s2.said() == 1 }, 5*time.Second, time.Millisecond, "a new socket's hello")
	s2.mu.Lock()
	hello, ok := s2.sent[0].(rt.Hello)
	s2.mu.Unlock()
	require.True(t, ok)
	require.Equal(t, uint64(2), hello.Version, "the hello asks from what the replica holds, not from v5")
}
