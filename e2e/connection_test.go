//go:build e2e

package e2e

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
	rtserver "github.com/tabfence/tabfence/receiver/realtime"
)

// One realtime connection per browser: however many tabs, one socket.

// Ten tabs of one scope: once every tab is ready the server counts one
// connection, and it stays one while every tab mutates for a few seconds
// (followers never dial, not even to send); every tab hears every delta
// once, in order, and its replica holds every record; one tab leads
// throughout.
func TestConnectionTenTabsOneSocket(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupConn(t, k, false)
		tabs := e.connTabs(10, harness.ConnOptions{Scope: scope(t)})
		leader := waitReady(t, tabs)
		st := e.stats()
		require.Equal(t, int64(1), st.Open, "server counts %+v with ten tabs ready, want one open", st)
		require.Equal(t, int64(1), st.Accepted, "server accepted %d connections for ten tabs, want 1", st.Accepted)
		require.Equal(t, 1, e.tap.Open(), "sockets open at the server, seen by the tap")
		require.Equal(t, []int{101}, e.tap.Dials(), "dials at /realtime")

		want := map[string]string{}
		var heard []string
		start := time.Now()
		for round := 0; round < 2 || time.Since(start) < 3*time.Second; round++ {
			keys, titles := mutateAll(t, tabs, "r"+strconv.Itoa(round))
			maps.Copy(want, titles)
			heard = append(heard, keys...)
			e.waitOneSocket(tabs, heard)
			for i, k := range keys {
				r := waitAcked(t, tabs[i], k, failoverTimeout)
				require.False(t, r.Ack.Replayed, "tab %d's first send of %s acked as replayed", i, k)
			}
		}
		waitIssues(t, tabs, want, failoverTimeout)
		for i, tab := range tabs {
			requireInOrder(t, "tab "+strconv.Itoa(i), connDeltas(t, tab))
		}
		snap := e.snapshot()
		require.Len(t, snapshotKeys(snap), len(want), "server records")
		require.Equal(t, float64(len(want)), snap.Version, "server version after %d mutations applied once each", len(want))
		ss := waitConn(t, tabs, "every tab at the server's version", failoverTimeout, func(_ int, s harness.ConnStatus) bool {
			return s.Version == snap.Version && s.Pending == 0
		})
		require.Equal(t, []int{leader}, leaderIndexes(ss), "leaders after the rounds")
		st = e.stats()
		require.Equal(t, int64(1), st.Accepted, "server accepted %d connections in all", st.Accepted)
		t.Logf("ten tabs, %d mutations from every tab over %v: server stats %+v, dials %v", len(want), time.Since(start).Round(time.Millisecond), st, e.tap.Dials())
	})
}

// waitOneSocket waits until every tab heard every key, failing at once
// if the server or the tap ever sees a second connection meanwhile.
func (e *connEnv) waitOneSocket(tabs []*harness.Tab, keys []string) {
	e.t.Helper()
	err := harness.Poll(context.Background(), "every tab to hear "+strings.Join(keys[len(keys)-len(tabs):], ","), failoverTimeout, 25*time.Millisecond, func() (bool, error) {
		if st := e.stats(); st.Open != 1 || st.Accepted != 1 {
			e.t.Fatalf("server stats %+v while the tabs mutate: a follower connected", st)
		}
		if n, d := e.tap.Open(), e.tap.Dials(); n != 1 || len(d) != 1 {
			e.t.Fatalf("tap: %d sockets open, dials %v while the tabs mutate: a follower dialed", n, d)
		}
		for _, tab := range tabs {
			n := deltaKeys(connDeltas(e.t, tab))
			for _, k := range keys {
				if n[k] == 0 {
					return false, nil
				}
			}
		}
		return true, nil
	})
	require.NoError(e.t, err)
}

// Version skew: tabs of the old build (protocol 1: the v1 lock, its own
// database) lead and follow; a tab of the new build (protocol 2) of the
// same scope does not wait for the v1 lock: it leads its own election and
// opens its own socket. Two leaders, two sockets, each on its own names,
// and both builds see each other's edits through the server.
func TestConnectionVersionSkew(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupConn(t, k, false)
		s := scope(t)
		old := e.connTabs(2, harness.ConnOptions{Scope: s, Protocol: 1})
		require.Equal(t, 0, waitReady(t, old), "the first v1 tab leads")
		e.waitStats("the v1 leader's socket", func(st rtserver.Stats) bool { return st.Open == 1 })

		v2 := e.connTab(harness.ConnOptions{Scope: s, Protocol: 2}, false)
		waitConn(t, []*harness.Tab{v2}, "the v2 tab to lead its own connection", startTimeout, func(_ int, st harness.ConnStatus) bool {
			return st.Leader && st.State == "ready"
		})
		st := e.waitStats("two sockets", func(st rtserver.Stats) bool { return st.Open == 2 })
		require.Equal(t, int64(2), st.Accepted, "server stats %+v, want two connections (one per build)", st)
		require.Equal(t, 2, e.tap.Open(), "sockets open at the server, seen by the tap")

		n1 := eval[harness.ConnNames](t, old[0], `({ lockName: RT.conn.lockName, database: RT.conn.database, scope: RT.conn.scope, protocol: RT.conn.protocol })`)
		n2 := eval[harness.ConnNames](t, v2, `({ lockName: RT.conn.lockName, database: RT.conn.database, scope: RT.conn.scope, protocol: RT.conn.protocol })`)
		require.Equal(t, "tabfence:rt-"+s+":v1", n1.LockName, "v1 lock")
		require.Equal(t, "tabfence:rt-"+s+":v2", n2.LockName, "v2 lock")
		require.NotEqual(t, n1.Database, n2.Database, "both builds use database %q", n1.Database)
		for _, n := range []string{n1.LockName, n2.LockName} {
			ls, err := v2.Locks(n)
			require.NoError(t, err)
			require.Equal(t, 1, ls.Held, "lock %s: %+v, want held once", n, ls)
		}
		ss := waitConn(t, old, "the v1 tabs still ready under their leader", failoverTimeout, func(_ int, st harness.ConnStatus) bool { return st.State == "ready" })
		require.Equal(t, []int{0}, leaderIndexes(ss), "v1 leaders")

		require.NoError(t, v2.Mutate("from-v2", "new build"))
		require.NoError(t, old[1].Mutate("from-v1", "old build"))
		waitAcked(t, v2, "from-v2", failoverTimeout)
		waitAcked(t, old[1], "from-v1", failoverTimeout)
		all := append([]*harness.Tab{v2}, old...)
		waitDeltas(t, all, []string{"from-v2", "from-v1"}, failoverTimeout)
		waitIssues(t, all, map[string]string{"from-v2": "new build", "from-v1": "old build"}, failoverTimeout)
		require.Equal(t, int64(2), e.stats().Accepted, "connections accepted in all")
	})
}
