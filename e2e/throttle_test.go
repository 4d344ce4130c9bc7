//go:build e2e

package e2e

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// Users' hidden tabs are throttled (timers about once a second), so this
// test keeps the browser's default background throttling (Chromium's, or
// Firefox's), which the other tests turn off. Failover must not depend on timers: the browser grants
// the lock to the next waiter and the runtime reacts to that callback.
func TestFailoverWithThrottledBackgroundTabs(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, true)
		s := scope(t)
		tabs := []*harness.Tab{e.demo(s, 1, "leader"), e.demo(s, 1, "follower"), e.demo(s, 1, "follower")}
		hidden := 0
		for _, tab := range tabs {
			if eval[string](t, tab, `document.visibilityState`) == "hidden" {
				hidden++
			}
		}
		t.Logf("%d of %d tabs are hidden", hidden, len(tabs))
		require.GreaterOrEqual(t, hidden, 2, "only %d tabs are hidden; the test needs hidden background tabs", hidden)
		// Show that throttling is real here: a 10 ms timer in a hidden tab.
		timer := eval[float64](t, tabs[1], `(async () => { const t0 = performance.now();
		for (let i = 0; i < 3; i++) await new Promise(r => setTimeout(r, 10));
		return performance.now() - t0; })()`)
		t.Logf("three 10 ms timers in a hidden tab took %.0f ms", timer)

		for next := 1; next < len(tabs); next++ {
			closedAt := harness.NowMs()
			tabs[next-1].Close()
			ev, err := tabs[next].WaitEvent("leader", 1, failoverTimeout)
			require.NoError(t, err, "throttled tab %d never led", next)
			t.Logf("throttled failover to tab %d: %.0f ms (close call to onLeader, page clock)", next, ev.At-closedAt)
			got := leaders(t, tabs)
			require.True(t, slices.Equal(got, []int{next}), "leaders %v, want [%d]", got, next)
		}

		// Resign in a throttled tab: the lock is released and retaken by the
		// same (only) tab with a new generation, without waiting on a timer.
		last := tabs[len(tabs)-1]
		start := time.Now()
		eval[any](t, last, `tabfenceDemo.election.resign().then(() => null)`)
		ev, err := last.WaitEvent("leader", 2, failoverTimeout)
		require.NoError(t, err)
		require.Equal(t, 2, ev.Generation, "generation %d after resign, want 2", ev.Generation)
		t.Logf("lone throttled tab led again %v after resigning", time.Since(start).Round(time.Millisecond))
	})
}
