//go:build !(js && wasm)

package locks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The watchdog inside an election, on fakeLocks and the in-memory heartbeat
// bus (a page cannot freeze part of itself, so in the browser this is
// e2e/watchdog_test.go's). Real time: MinStallAfter is seconds long, and
// the tests run in parallel.

func watched(t *testing.T, name, scope string, f Fencer) *probe {
	return newProbe(t, name, scope, 1, func(c *Config) {
		c.Fencer = f
		c.StallAfter = MinStallAfter
	}).start()
}

func channelOf(p *probe) string { return HeartbeatChannel(p.e.LockName()) }

// A frozen leader (its heartbeats stop, its lock stays held) is stolen
// from by the waiting follower within StallAfter and the jitter; the old
// leader learns it was stolen, the thief's token is higher.
func TestWatchdogStealsFromFrozenLeader(t *testing.T) {
	t.Parallel()
	scope, f := uniqueScope(t), &countingFencer{}
	a := watched(t, "a", scope, f)
	la := a.waitLeader()
	b := watched(t, "b", scope, f)
	b.waitFollower()
	bs := bus.beacons(channelOf(a))
	require.Len(t, bs, 2, "%d beacons", len(bs))
	// Beating, the leader is never stolen from.
	time.Sleep(MinStallAfter + time.Second)
	require.True(t, a.e.IsLeader(), "a live leader was stolen from")
	require.False(t, b.e.IsLeader(), "a live leader was stolen from")
	require.NotEqual(t, uint64(0), b.e.WatchStats().Heard, "follower heard no heartbeat")

	frozenAt := time.Now()
	bs[0].freeze(true)
	lb := b.waitLeader()
	took := time.Since(frozenAt)
	require.GreaterOrEqual(t, took, MinStallAfter-HeartbeatEvery, "stole %v after the freeze (stallAfter %v)", took, MinStallAfter)
	require.LessOrEqual(t, took, MinStallAfter+maxJitter+time.Second, "stole %v after the freeze (stallAfter %v)", took, MinStallAfter)
	require.Greater(t, lb.Token, la.Token, "thief's token %d not above %d", lb.Token, la.Token)
	a.waitLost(ReasonStolen)
	require.Error(t, la.Ctx.Err(), "old leadership context still live")
	require.Equal(t, uint64(1), b.e.WatchStats().Steals)
	t.Logf("stolen %v after the freeze", took.Round(time.Millisecond))
	// The old leader rejoins as a follower; the new one's heartbeats keep
	// it from stealing back, although it is visible and "resumed".
	bs[0].freeze(false)
	a.waitFollower()
	time.Sleep(MinStallAfter + time.Second)
	require.True(t, b.e.IsLeader(), "b leads %v, a's steals %d", b.e.IsLeader(), a.e.WatchStats().Steals)
	require.Equal(t, uint64(0), a.e.WatchStats().Steals, "b leads %v, a's steals %d", b.e.IsLeader(), a.e.WatchStats().Steals)
}

// A hidden follower never steals, however long the leader is silent; once
// the page is visible it steals after a full StallAfter of silence from
// then.
func TestWatchdogHiddenFollowerNeverSteals(t *testing.T) {
	t.Parallel()
	scope, f := uniqueScope(t), &countingFencer{}
	a := watched(t, "a", scope, f)
	a.waitLeader()
	b := watched(t, "b", scope, f)
	b.waitFollower()
	bs := bus.beacons(channelOf(a))
	bs[1].h.visible(false)
	bs[0].freeze(true)
	time.Sleep(2 * MinStallAfter)
	require.False(t, b.e.IsLeader(), "a hidden follower stole")
	require.True(t, a.e.IsLeader(), "a hidden follower stole")
	shown := time.Now()
	bs[1].h.visible(true)
	b.waitLeader()
	took := time.Since(shown)
	require.GreaterOrEqual(t, took, MinStallAfter-100*time.Millisecond, "stole %v after becoming visible: before a full stallAfter", took)
}

// Without the watchdog a frozen leader keeps its lock: the behaviour the
// watchdog exists to change.
func TestNoWatchdogFrozenLeaderKeepsLock(t *testing.T) {
	t.Parallel()
	scope, f := uniqueScope(t), &countingFencer{}
	a := newProbe(t, "a", scope, 1, func(c *Config) { c.Fencer = f }).start()
	a.waitLeader()
	b := newProbe(t, "b", scope, 1, func(c *Config) { c.Fencer = f }).start()
	b.waitFollower()
	require.Empty(t, bus.beacons(channelOf(a)), "an election without stallAfter opened a heartbeat channel")
	time.Sleep(MinStallAfter + time.Second)
	require.False(t, b.e.IsLeader(), "stolen without a watchdog")
}
