package realtime_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// redial runs l's timers until it dials again and returns the hello it
// sends, and the dial's generation.
func redial(t *testing.T, l *realtime.Leader) (rt.Hello, uint64) {
	t.Helper()
	require.Equal(t, realtime.Offline, l.State())
	at := l.Deadline()
	require.False(t, at.IsZero(), "a redial is scheduled")
	d, ok := has[realtime.Dial](l.Tick(at))
	require.True(t, ok)
	hello := sends(l.Dialed(at, d.Gen, nil))
	require.Len(t, hello, 1)
	return hello[0].(rt.Hello), d.Gen
}

// A delta the replica could not store (QuotaExceeded, a closed database)
// is not lost: the leader drops the socket, announces nothing, and asks
// the server again from the version the replica holds.
func TestFailedDeliverRedialsFromStoredVersion(t *testing.T) {
	l := realtime.NewLeader(cfg(), 3, nil)
	connect(t, l, t0, 5)
	gen := l.Gen()
	_, ok := has[realtime.Deliver](l.Received(t0, gen, rt.Delta{Version: 4, Prev: 3}))
	require.True(t, ok)
	_, ok = has[realtime.Deliver](l.Received(t0, gen, rt.Delta{Version: 5, Prev: 4}))
	require.True(t, ok)
	acts := l.Failed(t0, gen) // v5's write failed; v4 is stored
	_, closed := has[realtime.CloseSocket](acts)
	require.True(t, closed)
	_, delivered := has[realtime.Deliver](acts)
	_, settled := has[realtime.Settled](acts)
	require.False(t, delivered || settled, "nothing announced")
	require.Equal(t, uint64(4), l.Version())
	require.Empty(t, l.Received(t0, gen, rt.Delta{Version: 6, Prev: 5}), "the old socket no longer counts")

	hello, g2 := redial(t, l)
	require.Equal(t, uint64(4), hello.Version, "asks from what the replica holds")
	l.Received(t0, g2, rt.Ready{Version: 5})
	dv, ok := has[realtime.Deliver](l.Received(t0, g2, rt.Delta{Version: 5, Prev: 4}))
	require.True(t, ok, "v5 is delivered again")
	require.Equal(t, uint64(5), dv.Delta.Version)
	require.Empty(t, l.Failed(t0, g2-1), "a failure of an older socket is ignored")
}

// A reset whose snapshot could not be fetched or stored leaves the replica
// at its old version: the leader asks from there, and gets the reset again.
func TestFailedResetRedialsFromStoredVersion(t *testing.T) {
	l := realtime.NewLeader(cfg(), 57, nil)
	var dial realtime.Dial
	dial, _ = has[realtime.Dial](l.Start(t0))
	l.Dialed(t0, dial.Gen, nil)
	r, ok := has[realtime.ResetReplica](l.Received(t0, dial.Gen, rt.Ready{Version: 0, Reset: true}))
	require.True(t, ok)
	require.Equal(t, uint64(0), r.Version)
	for i := 0; i < 3; i++ {
		l.Failed(t0, l.Gen())
		require.Equal(t, uint64(57), l.Version())
		hello, g := redial(t, l)
		require.Equal(t, uint64(57), hello.Version)
		_, ok = has[realtime.ResetReplica](l.Received(t0, g, rt.Ready{Version: 0, Reset: true}))
		require.True(t, ok, "the reset comes again")
	}
}

// A batch's write may run on the socket's close (the app is handed its
// actions before the close is performed): the version still goes back,
// although the leader is offline already, and the redial asks from what
// the replica holds.
func TestFailedAfterTheSocketEndedStillRewinds(t *testing.T) {
	l := realtime.NewLeader(cfg(), 3, nil)
	connect(t, l, t0, 5)
	gen := l.Gen()
	_, ok := has[realtime.Deliver](l.Received(t0, gen, rt.Delta{Version: 4, Prev: 3}))
	require.True(t, ok)
	_, closed := has[realtime.CloseSocket](l.Closed(t0, gen, 1006))
	require.True(t, closed)
	require.Equal(t, realtime.Offline, l.State())
	l.Failed(t0, l.Gen()) // v4's write failed after the close
	require.Equal(t, uint64(3), l.Version())
	hello, _ := redial(t, l)
	require.Equal(t, uint64(3), hello.Version, "asks from what the replica holds")
}
