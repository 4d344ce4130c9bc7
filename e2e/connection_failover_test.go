//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
	rtserver "github.com/tabfence/tabfence/receiver/realtime"
)

// A frozen leader, and hidden tabs under Chromium's throttling.

// The leader is frozen with CDP (timers stopped, its Web Lock kept; its
// socket stays open at the server, and Chromium closes it, 1006, when the
// page resumes: measured here). A visible follower's watchdog steals
// (stallAfterMs), the new leader connects and the data keeps flowing.
// Resumed, the old tab is edited at once, before it can have heard that
// it lost: its writes under its old token (IndexedDB, and the server's
// fence for a redial's sends) are stale. It steps down (no second writer:
// every tab hears each version once, in order), keeps no socket, and its
// edits are sent by the new leader and applied once each.
func TestConnectionFrozenLeaderSupersededAndStale(t *testing.T) {
	chromiumOnly(t, "freezes the leader page: Page.setWebLifecycleState is CDP-only", func(t *testing.T, k harness.Kind) {
		e := setupConn(t, k, false) // every tab its own window: all visible
		o := harness.ConnOptions{Scope: scope(t), StallAfterMs: 3000, FencePath: "/fence/"}
		tabs := e.connTabs(3, o)
		require.Equal(t, 0, waitReady(t, tabs), "the first tab leads")
		a, rest := tabs[0], tabs[1:]
		require.NoError(t, tabs[2].Mutate("s1", "seed"))
		waitAcked(t, tabs[2], "s1", failoverTimeout)
		waitDeltas(t, tabs, []string{"s1"}, failoverTimeout)
		v0, old := e.snapshot().Version, connStatus(t, a)

		require.NoError(t, a.SetFrozen(true))
		ss := waitConn(t, rest, "a follower to take over and connect", 3*failoverTimeout, func(_ int, s harness.ConnStatus) bool {
			return s.LeaderID != old.ID && s.LeaderID != "" && s.Token > old.Token && s.State == "ready"
		})
		l := leaderIndexes(ss)
		require.Len(t, l, 1, "leaders among the followers: %s", statusLine(ss))
		thief := rest[l[0]]
		e.waitStats("the new leader's socket", func(st rtserver.Stats) bool { return st.Accepted == 2 })
		for _, k := range []string{"f1", "f2"} {
			require.NoError(t, tabs[2].Mutate(k, "while frozen"))
			waitAcked(t, tabs[2], k, failoverTimeout)
		}
		waitDeltas(t, rest, []string{"f1", "f2"}, failoverTimeout)
		t.Logf("while frozen: sockets open %d (tap), server %+v", e.tap.Open(), e.stats())

		require.NoError(t, a.SetFrozen(false))
		require.NoError(t, a.Mutate("resumed-edit", "made as the tab resumed"))
		newID := connStatus(t, thief).ID
		waitConn(t, []*harness.Tab{a}, "the resumed tab to step down", failoverTimeout, func(_ int, s harness.ConnStatus) bool {
			return !s.Leader && s.LeaderID == newID
		})
		e.waitStats("the old leader's socket closed", func(st rtserver.Stats) bool { return st.Open == 1 })
		require.NoError(t, harness.Poll(context.Background(), "one socket at the tap", failoverTimeout, 25*time.Millisecond, func() (bool, error) {
			return e.tap.Open() == 1, nil
		}))
		r := waitAcked(t, a, "resumed-edit", 2*failoverTimeout)
		t.Logf("the resumed tab's edit: %+v", r.Ack)
		require.NoError(t, a.Mutate("after", "after the resume"))
		waitAcked(t, a, "after", failoverTimeout)

		keys := []string{"s1", "f1", "f2", "resumed-edit", "after"}
		waitDeltas(t, rest, keys, failoverTimeout)
		snap := e.snapshot()
		require.Equal(t, v0+4, snap.Version, "server version %v after 4 edits from %v: an edit applied twice or lost", snap.Version, v0)
		for _, k := range keys {
			require.Equal(t, 1, snapshotKeys(snap)[k], "server records of %s", k)
		}
		waitConn(t, tabs, "every tab at the server's version, one leader", failoverTimeout, func(_ int, s harness.ConnStatus) bool {
			return s.Version == snap.Version && s.Pending == 0 && s.LeaderID == newID
		})
		for i, tab := range tabs {
			requireInOrder(t, "tab "+string(rune('a'+i)), connDeltas(t, tab))
		}
		// A deposed leader still driving would redial within the backoff's cap
		// (2 s) of its socket's close: watch for longer.
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			require.Equal(t, 1, e.tap.Open(), "sockets open after the takeover (dials %v)", e.tap.Dials())
		}
		t.Logf("dials at /realtime: %v; server %+v", e.tap.Dials(), e.stats())
	})
}

// Chromium's default throttling, tabs in one window: the leader and one
// follower are hidden (timers about once a second, no animation frames),
// the newest tab is visible. An edit in the visible tab reaches the hidden
// tabs' onDelta and onStatus within hiddenNotifyMs and the throttling's
// slack: their notifications run on a timer, not on
// requestAnimationFrame, which a hidden tab never runs.
func TestConnectionHiddenTabsNotifiedOnTimer(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupConn(t, k, true)
		const hiddenNotify = 1000
		// A throttled timer fires at the next of the once-a-second wake-ups
		// (up to 1 s late), and the machine is shared: 1 s more.
		const slack = 2000
		o := harness.ConnOptions{Scope: scope(t), HiddenNotifyMs: hiddenNotify}
		tabs := e.connTabs(3, o)
		require.Equal(t, 0, waitReady(t, tabs), "the first tab leads")
		shown := tabs[2]
		for i, want := range []string{"hidden", "hidden", "visible"} {
			require.Equal(t, want, visibility(t, tabs[i]), "tab %d's visibility", i)
		}
		require.NoError(t, shown.Mutate("seen", "from the visible tab"))
		waitAcked(t, shown, "seen", failoverTimeout)
		waitDeltas(t, []*harness.Tab{shown}, []string{"seen"}, failoverTimeout)
		at, version := deltaOf(t, shown, "seen")

		for i, tab := range tabs[:2] {
			var heard, told float64
			err := harness.Poll(context.Background(), "the hidden tab's onDelta and onStatus", failoverTimeout, 25*time.Millisecond, func() (bool, error) {
				if heard == 0 {
					if ds := connDeltas(t, tab); deltaKeys(ds)["seen"] > 0 {
						heard, _ = deltaOf(t, tab, "seen")
					}
				}
				ss, err := tab.ConnStatuses()
				for _, s := range ss {
					if told == 0 && s.Version >= version {
						told = s.At
					}
				}
				return heard > 0 && told > 0, err
			})
			require.NoError(t, err, "hidden tab %d", i)
			t.Logf("hidden tab %d: onDelta %.0f ms, onStatus %.0f ms after the visible tab's onDelta", i, heard-at, told-at)
			require.LessOrEqual(t, heard-at, float64(hiddenNotify+slack), "hidden tab %d's onDelta %.0f ms late", i, heard-at)
			require.LessOrEqual(t, told-at, float64(hiddenNotify+slack), "hidden tab %d's onStatus %.0f ms late", i, told-at)
			require.Equal(t, "hidden", visibility(t, tab), "tab %d's visibility after", i)
		}
	})
}

// deltaOf returns when the tab's onDelta heard key, and at which version.
func deltaOf(t *testing.T, tab *harness.Tab, key string) (at, version float64) {
	t.Helper()
	for _, d := range connDeltas(t, tab) {
		for _, k := range d.Keys {
			if k == key {
				return d.At, d.Version
			}
		}
	}
	t.Fatalf("the tab's onDelta never heard %s", key)
	return 0, 0
}
