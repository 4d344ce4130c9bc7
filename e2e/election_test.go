//go:build e2e

package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// Five tabs, exactly one leader at every sample; then close the leader
// again and again: the next tab in the queue takes over, down to the last.
// The queue is FIFO, so the order of takeovers is the order the tabs joined.
func TestFiveTabsOneLeaderAndFailoverChain(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		s := scope(t)
		tabs := []*harness.Tab{e.demo(s, 1, "leader")}
		for range 4 {
			tabs = append(tabs, e.demo(s, 1, "follower"))
		}
		name := lockName(t, tabs[0])

		// Sample for a while: one leader in every sample, by the tabs' own
		// account and by the browser's lock manager.
		for i := range 20 {
			got := leaders(t, tabs)
			require.True(t, slices.Equal(got, []int{0}), "sample %d: leaders %v, want [0]", i, got)
			st, err := tabs[4].Locks(name)
			require.NoError(t, err)
			require.Equal(t, 1, st.Held, "sample %d: lock %s held %d pending %d, want 1 and 4", i, name, st.Held, st.Pending)
			require.Equal(t, 4, st.Pending, "sample %d: lock %s held %d pending %d, want 1 and 4", i, name, st.Held, st.Pending)
		}

		for next := 1; next < len(tabs); next++ {
			start := time.Now()
			tabs[next-1].Close()
			_, err := tabs[next].WaitEvent("leader", 1, failoverTimeout)
			require.NoError(t, err, "after closing tab %d, tab %d never led", next-1, next)
			t.Logf("tab %d leads %v after tab %d closed", next, time.Since(start).Round(time.Millisecond), next-1)
			// Every remaining tab agrees, and none of the others ever led.
			got := leaders(t, tabs)
			require.True(t, slices.Equal(got, []int{next}), "after failover to %d: leaders %v", next, got)
			for i := next + 1; i < len(tabs); i++ {
				evs, err := tabs[i].Events()
				require.NoError(t, err)
				n := harness.Count(evs, "leader")
				require.Equal(t, 0, n, "waiting tab %d led %d times", i, n)
			}
		}
		ev, _ := tabs[4].Events()
		l, _ := harness.Last(ev, "leader")
		assert.Equal(t, 1, l.Generation, "last tab's first leadership has generation %d, want 1", l.Generation)
	})
}

// A waiting tab that goes away — its tab closed, or its election closed
// while the page stays open — withdraws its request and never leads.
func TestWaitingTabThatClosesNeverLeads(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		s := scope(t)
		leader := e.demo(s, 1, "leader")
		closedTab := e.demo(s, 1, "follower")
		closedElection := e.demo(s, 1, "follower")
		last := e.demo(s, 1, "follower")
		name := lockName(t, leader)

		closedTab.Close()
		eval[any](t, closedElection, `tabfenceDemo.election.close().then(() => null)`)
		require.NoError(t, harness.Poll(context.Background(), "two requests left in the queue", failoverTimeout, 20*time.Millisecond, func() (bool, error) {
			st, err := last.Locks(name)
			return st.Held == 1 && st.Pending == 1, err
		}))

		leader.Close()
		_, err := last.WaitEvent("leader", 1, failoverTimeout)
		require.NoError(t, err, "the last waiting tab never led")
		evs, err := closedElection.Events()
		require.NoError(t, err)
		require.Equal(t, 0, harness.Count(evs, "leader"), "a closed election led: %+v", evs)
		require.Equal(t, "false InvalidStateError", eval[string](t, closedElection, `(async () => {
		const e = tabfenceDemo.election;
		try { await e.resign(); return "resign resolved"; } catch (err) { return e.isLeader + " " + err.name; }
	})()`), "closed election")
		st, err := last.Locks(name)
		require.NoError(t, err)
		require.Equal(t, 1, st.Held, "lock held %d pending %d, want 1 and 0", st.Held, st.Pending)
		require.Equal(t, 0, st.Pending, "lock held %d pending %d, want 1 and 0", st.Held, st.Pending)
	})
}

// The reference's first bug: a tab left open on an old version must not
// hold the tabs of a new version hostage. Hold the v1 lock by hand with
// plain JavaScript; a tab on v2 leads at once, a tab on v1 waits.
func TestVersionSkewNewVersionLeadsAtOnce(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		s := scope(t)
		old := e.open("raw-locks.html", s, 1, "leader") // plain navigator.locks, v1 lock held forever
		require.Equal(t, "tabfence:"+s+":v1", eval[string](t, old, `document.getElementById("lock").textContent`), "raw page holds")

		v1 := e.demo(s, 1, "follower")
		start := time.Now()
		v2 := e.demo(s, 2, "leader")
		t.Logf("v2 tab led %v after opening, v1 lock still held", time.Since(start).Round(time.Millisecond))
		evs, err := v2.Events()
		require.NoError(t, err)
		joined, _ := harness.Last(evs, "joined")
		led, _ := harness.Last(evs, "leader")
		require.Equal(t, 0, harness.Count(evs, "follower"), "v2 tab waited as a follower first: %+v", evs)
		d := led.At - joined.At
		require.LessOrEqual(t, d, float64(1000), "v2 tab took %.0f ms from joining to leading", d)
		require.Equal(t, "tabfence:"+s+":v2", lockName(t, v2), "v2 lock name")
		ok, _ := v1.IsLeader()
		require.False(t, ok, "v1 demo tab leads while the raw tab holds the v1 lock")
	})
}

// Steal: the old leader's onLost fires with "stolen" and its ctx.signal
// aborts; the thief leads; the old leader rejoins as a follower.
func TestStealEndsOldLeadership(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		s := scope(t)
		old := e.demo(s, 1, "leader")
		thief := e.demo(s, 1, "follower")

		tok := eval[map[string]any](t, thief, `tabfenceDemo.election.steal().then(c => ({
		lockName: c.lockName, generation: c.generation, aborted: c.signal.aborted,
		same: c === tabfenceDemo.election.leadership }))`)
		if tok["lockName"] != "tabfence:"+s+":v1" || tok["aborted"] != false || tok["same"] != true {
			t.Fatalf("steal resolved to %v", tok)
		}
		abort, err := old.WaitEvent("signal-abort", 1, failoverTimeout)
		require.NoError(t, err, "old leader's signal never aborted")
		// The abort reason is a named Error saying why.
		if abort.Name != "LockStolenError" && abort.Name != "LostLeadershipError" {
			t.Errorf("signal.reason.name = %q", abort.Name)
		}
		lost, err := old.WaitEvent("lost", 1, failoverTimeout)
		require.NoError(t, err)
		require.Equal(t, "stolen", lost.Reason, "old leader lost with reason %q, want stolen", lost.Reason)
		_, err = old.WaitEvent("follower", 1, failoverTimeout)
		require.NoError(t, err, "old leader did not rejoin as follower")
		got := leaders(t, []*harness.Tab{old, thief})
		require.True(t, slices.Equal(got, []int{1}), "leaders %v, want only the thief", got)
		_, err = thief.WaitEvent("leader", 1, failoverTimeout)
		require.NoError(t, err, "thief's onLeader never fired")
	})
}

// Reloading the leader hands leadership to the next tab, and the reloaded
// page joins again as a follower.
func TestReloadOfLeaderHandsOver(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		s := scope(t)
		leader := e.demo(s, 1, "leader")
		next := e.demo(s, 1, "follower")
		name := lockName(t, leader)

		require.NoError(t, leader.Reload())
		_, err := next.WaitEvent("leader", 1, failoverTimeout)
		require.NoError(t, err, "next tab never led after the leader reloaded")
		_, err = leader.WaitEvent("follower", 1, startTimeout)
		require.NoError(t, err, "reloaded page did not rejoin as follower")
		got := leaders(t, []*harness.Tab{leader, next})
		require.True(t, slices.Equal(got, []int{1}), "leaders %v, want [1]", got)
		st, err := next.Locks(name)
		require.NoError(t, err)
		require.Equal(t, 1, st.Held, "held %d pending %d after reload, want 1 and 1 (the old page's request is gone)", st.Held, st.Pending)
		require.Equal(t, 1, st.Pending, "held %d pending %d after reload, want 1 and 1 (the old page's request is gone)", st.Held, st.Pending)
	})
}
