//go:build e2e

package e2e

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
	rtserver "github.com/tabfence/tabfence/receiver/realtime"
)

// A connection's end (a sign-out deletes the database) and a follower that
// missed announcements.

// Sign-out from a follower deletes the replica's database: every tab's
// connection closes with "deleted" (the leader hears it through its
// database's blocking callback, not from a message), the leader releases
// its lock and nobody takes it, no socket stays open and nobody dials
// again, and the database is gone.
func TestConnectionSignOutDeletesAndReleases(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupConn(t, k, false)
		tabs := e.connTabs(3, harness.ConnOptions{Scope: scope(t)})
		require.Equal(t, 0, waitReady(t, tabs), "the first tab leads")
		require.NoError(t, tabs[2].Mutate("doomed", "before the sign-out"))
		waitAcked(t, tabs[2], "doomed", failoverTimeout)
		waitDeltas(t, tabs, []string{"doomed"}, failoverTimeout)
		names := eval[harness.ConnNames](t, tabs[1], `({ lockName: RT.conn.lockName, database: RT.conn.database })`)
		require.True(t, eval[bool](t, tabs[1], `RT.hasDatabase()`), "database %s not listed before the sign-out", names.Database)

		require.True(t, eval[bool](t, tabs[1], `RT.conn.signOut().then(() => true)`), "signOut")
		waitConn(t, tabs, "every tab closed (deleted)", failoverTimeout, func(_ int, s harness.ConnStatus) bool {
			return s.State == "closed" && s.Closed != nil && *s.Closed == "deleted"
		})
		require.NoError(t, harness.Poll(context.Background(), "the lock released and not taken", failoverTimeout, 25*time.Millisecond, func() (bool, error) {
			ls, err := tabs[1].Locks(names.LockName)
			return ls.Held == 0 && ls.Pending == 0, err
		}))
		e.waitStats("no socket open", func(st rtserver.Stats) bool { return st.Open == 0 })
		require.Equal(t, 0, e.tap.Open(), "sockets open, seen by the tap")
		dials := len(e.tap.Dials())
		// A while for a tab that would reconnect or re-create the database.
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			require.Equal(t, dials, len(e.tap.Dials()), "a tab dialed after the sign-out: %v", e.tap.Dials())
			ls, err := tabs[0].Locks(names.LockName)
			require.NoError(t, err)
			require.Equal(t, 0, ls.Held+ls.Pending, "lock %s after the sign-out: %+v", names.LockName, ls)
		}
		for i, tab := range tabs {
			require.False(t, eval[bool](t, tab, `RT.hasDatabase()`), "tab %d lists database %s after the sign-out", i, names.Database)
			s := connStatus(t, tab)
			require.False(t, s.Leader, "tab %d still leads after the sign-out: %+v", i, s)
		}
		got := eval[string](t, tabs[0], `RT.conn.mutate({ op: "issue.put", payload: { id: "late", title: "x", done: false } }).then(() => "resolved", (e) => e.name)`)
		require.NotEqual(t, "resolved", got, "a mutation after the sign-out was acked")
	})
}

// A follower misses announcements: its page drops what arrives on the
// connection's channel (RT.mute) while three edits are announced, then
// listens again. The next announcement shows it the gap: its onReload
// fires, and its replica (read) holds every record, at the leader's
// version, while its onDelta never goes back or repeats.
func TestConnectionGapReloads(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupConn(t, k, false)
		o := harness.ConnOptions{Scope: scope(t)}
		a := e.connTab(o, false)
		b := e.connTab(o, true)
		c := e.connTab(o, false)
		tabs := []*harness.Tab{a, b, c}
		require.Equal(t, 0, waitReady(t, tabs), "the first tab leads")
		require.NoError(t, c.Mutate("g0", "heard by all"))
		waitAcked(t, c, "g0", failoverTimeout)
		waitDeltas(t, tabs, []string{"g0"}, failoverTimeout)
		want := map[string]string{"g0": "heard by all"}

		require.True(t, eval[bool](t, b, `RT.mute(true)`))
		missed, titles := mutateAll(t, []*harness.Tab{a, c, c}, "missed")
		maps.Copy(want, titles)
		for i, k := range missed {
			waitAcked(t, []*harness.Tab{a, c, c}[i], k, failoverTimeout)
		}
		waitDeltas(t, []*harness.Tab{a, c}, missed, failoverTimeout)
		require.Greater(t, eval[float64](t, b, `RT.dropped`), float64(0), "b dropped nothing: the runtime does not listen on the connection's channel?")
		require.Equal(t, 0, deltaKeys(connDeltas(t, b))["missed-0"], "b heard an edit while it could not listen")
		reloads, err := b.ConnReloads()
		require.NoError(t, err)
		require.Empty(t, reloads, "b reloaded before the gap showed")
		require.True(t, eval[bool](t, b, `RT.mute(false)`))

		require.NoError(t, c.Mutate("next", "after the gap"))
		want["next"] = "after the gap"
		waitAcked(t, c, "next", failoverTimeout)
		waitDeltas(t, []*harness.Tab{a, c}, []string{"next"}, failoverTimeout)
		require.NoError(t, harness.Poll(context.Background(), "b's onReload", failoverTimeout, 25*time.Millisecond, func() (bool, error) {
			reloads, err = b.ConnReloads()
			return len(reloads) > 0, err
		}))
		lead := connStatus(t, a).Version
		waitConn(t, tabs, "every tab at the leader's version", failoverTimeout, func(_ int, s harness.ConnStatus) bool {
			return s.Version == lead
		})
		require.GreaterOrEqual(t, reloads[len(reloads)-1]+1, lead, "b's reload at version %v, the leader holds %v", reloads[len(reloads)-1], lead)
		waitIssues(t, tabs, want, failoverTimeout)
		requireInOrder(t, "b", connDeltas(t, b))
		t.Logf("b dropped %v messages, reloaded at %v; leader version %v", eval[float64](t, b, `RT.dropped`), reloads, lead)
	})
}
