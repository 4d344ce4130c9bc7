//go:build !(js && wasm)

package locks

import (
	"testing"
	"time"
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
	if len(bs) != 2 {
		t.Fatalf("%d beacons", len(bs))
	}
	// Beating, the leader is never stolen from.
	time.Sleep(MinStallAfter + time.Second)
	if !a.e.IsLeader() || b.e.IsLeader() {
		t.Fatal("a live leader was stolen from")
	}
	if b.e.WatchStats().Heard == 0 {
		t.Fatal("follower heard no heartbeat")
	}

	frozenAt := time.Now()
	bs[0].freeze(true)
	lb := b.waitLeader()
	took := time.Since(frozenAt)
	if took < MinStallAfter-HeartbeatEvery || took > MinStallAfter+maxJitter+time.Second {
		t.Fatalf("stole %v after the freeze (stallAfter %v)", took, MinStallAfter)
	}
	if lb.Token <= la.Token {
		t.Fatalf("thief's token %d not above %d", lb.Token, la.Token)
	}
	a.waitLost(ReasonStolen)
	if la.Ctx.Err() == nil {
		t.Fatal("old leadership context still live")
	}
	if s := b.e.WatchStats(); s.Steals != 1 {
		t.Fatalf("%+v", s)
	}
	t.Logf("stolen %v after the freeze", took.Round(time.Millisecond))
	// The old leader rejoins as a follower; the new one's heartbeats keep
	// it from stealing back, although it is visible and "resumed".
	bs[0].freeze(false)
	a.waitFollower()
	time.Sleep(MinStallAfter + time.Second)
	if !b.e.IsLeader() || a.e.WatchStats().Steals != 0 {
		t.Fatalf("b leads %v, a's steals %d", b.e.IsLeader(), a.e.WatchStats().Steals)
	}
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
	if b.e.IsLeader() || !a.e.IsLeader() {
		t.Fatal("a hidden follower stole")
	}
	shown := time.Now()
	bs[1].h.visible(true)
	b.waitLeader()
	if took := time.Since(shown); took < MinStallAfter-100*time.Millisecond {
		t.Fatalf("stole %v after becoming visible: before a full stallAfter", took)
	}
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
	if len(bus.beacons(channelOf(a))) != 0 {
		t.Fatal("an election without stallAfter opened a heartbeat channel")
	}
	time.Sleep(MinStallAfter + time.Second)
	if b.e.IsLeader() {
		t.Fatal("stolen without a watchdog")
	}
}
