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

// Outages and sessions: the edit made while the network is down, and a
// leader whose session ended.

// The reference's ugly case. The network goes down: CDP network
// emulation in every tab (new dials fail with 1006, fetch fails,
// navigator.onLine is false, the offline event fires) and the live socket
// is cut (the tap). Both halves, because emulation alone only pauses an
// open WebSocket: measured here, a frame sent while "offline" reached the
// server when the tab closed, which no outage does. A real loss of the
// network (Wi-Fi off) closes the browser's sockets the same way; the app's
// own switch, conn.setOffline(true), would be a clean close, not an
// outage. A follower edits; every tab shows it pending. The leader's tab
// closes before the edit could reach the server. Another tab leads and
// cannot connect; the network comes back; it connects and resends. The
// follower's promise resolves, every tab shows the edit once (replica and
// onDelta), and the server applied it once (one record, its version one
// above where it was).
func TestConnectionOfflineEditLeaderClosesFollowerResends(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupConn(t, k, false)
		o := harness.ConnOptions{Scope: scope(t), PingEveryMs: 2000, PongTimeoutMs: 2000}
		tabs := e.connTabs(3, o)
		require.Equal(t, 0, waitReady(t, tabs), "the first tab leads")
		a, b, c := tabs[0], tabs[1], tabs[2]
		require.NoError(t, b.Mutate("before", "before the outage"))
		waitAcked(t, b, "before", failoverTimeout)
		waitDeltas(t, tabs, []string{"before"}, failoverTimeout)
		v0 := e.snapshot().Version
		oldLeader := connStatus(t, a).ID

		for _, tab := range tabs {
			offline(t, tab, true)
		}
		e.tap.Drop() // none left if the leader closed its own on the offline event
		e.waitStats("the socket gone at the server", func(st rtserver.Stats) bool { return st.Open == 0 })
		require.NoError(t, b.Mutate("ugly", "edited offline"))
		waitConn(t, tabs, "every tab to show the edit pending", failoverTimeout, func(_ int, s harness.ConnStatus) bool { return s.Pending == 1 })
		require.Equal(t, "pending", mustMutation(t, b, "ugly").State, "b's mutate settled while the network was down")
		require.Equal(t, v0, e.snapshot().Version, "the server applied something while the browser was offline")

		// The leader's page goes away while the network is down. Closing
		// the tab alone is not that in Chromium: chromedp detaches its CDP
		// session (ending the emulation) before it closes the target, and
		// in that gap the page is online again and resends "ugly". So the
		// page is first navigated away, still offline, then the tab closes.
		require.NoError(t, a.Navigate("about:blank"))
		a.Close()
		rest := []*harness.Tab{b, c}
		ss := waitConn(t, rest, "one of the others to lead", failoverTimeout, func(_ int, s harness.ConnStatus) bool {
			return s.LeaderID != "" && s.LeaderID != oldLeader
		})
		require.Len(t, leaderIndexes(ss), 1, "leaders: %s", statusLine(ss))
		require.NotEqual(t, "ready", ss[leaderIndexes(ss)[0]].State, "the new leader is ready with the network down")
		require.Equal(t, "pending", mustMutation(t, b, "ugly").State, "b's mutate settled with the network down")
		require.Equal(t, v0, e.snapshot().Version, "the server applied something while the browser was offline")

		for _, tab := range rest {
			offline(t, tab, false)
		}
		r := waitAcked(t, b, "ugly", 2*failoverTimeout)
		t.Logf("ack after the network came back: %+v (new leader: tab %d)", r.Ack, leaderIndexes(ss)[0]+1)
		require.Equal(t, "m-ugly", r.Ack.ID, "ack id")
		waitConn(t, rest, "both tabs ready with nothing pending at the new version", failoverTimeout, func(_ int, s harness.ConnStatus) bool {
			return s.State == "ready" && s.Pending == 0 && s.Version == v0+1
		})
		snap := e.snapshot()
		require.Equal(t, v0+1, snap.Version, "server version: the edit applied %v times", snap.Version-v0)
		require.Equal(t, 1, snapshotKeys(snap)["ugly"], "server records of the edit")
		for _, ch := range snap.Changes {
			if ch.Key == "ugly" {
				require.Equal(t, "edited offline", ch.Value.Title, "server's record")
				require.Equal(t, connUser, ch.Value.By, "server's record is the signed-in user's")
			}
		}
		waitIssues(t, rest, map[string]string{"before": "before the outage", "ugly": "edited offline"}, failoverTimeout)
		for i, tab := range rest {
			ds := connDeltas(t, tab)
			requireInOrder(t, "tab "+string(rune('b'+i)), ds)
			require.Equal(t, 1, deltaKeys(ds)["ugly"], "tab %c heard the edit %d times", 'b'+i, deltaKeys(ds)["ugly"])
		}
	})
}

func mustMutation(t *testing.T, tab *harness.Tab, key string) harness.MutationResult {
	t.Helper()
	r, err := tab.MutationOf(key)
	require.NoError(t, err)
	return r
}

// A signed-out leader. The session ends (the demo cookie cleared, which
// every tab shares) and the server's side of the socket goes away (the
// tap cuts it, as a server restart does): the leader's redial is refused,
// every tab says "unauthorized", and the leader does not dial again on its
// own (retrying on its own could join this replica to the next person's
// session). Another person signs in in another tab and asks (retry): the
// leader dials and the server refuses it for the replica's user, still
// unauthorized. The replica's user signs in again and asks: every tab is
// ready, and edits flow again.
func TestConnectionSignedOutLeaderRetriesOnlyWhenAsked(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupConn(t, k, false)
		tabs := e.connTabs(3, harness.ConnOptions{Scope: scope(t), User: connUser})
		require.Equal(t, 0, waitReady(t, tabs), "the first tab leads")
		require.True(t, eval[bool](t, tabs[1], `RT.setUser(null)`))
		require.Equal(t, 1, e.tap.Drop(), "sockets cut")
		waitConn(t, tabs, "every tab unauthorized", failoverTimeout, func(_ int, s harness.ConnStatus) bool { return s.State == "unauthorized" })
		// How the refusal reaches the page is the runtime's and the server's
		// business (a browser's WebSocket shows a refused upgrade only as
		// 1006): a 401 answer to the upgrade or to a probe, or an upgrade the
		// server closes with 4401. Either way no socket stays open.
		e.waitStats("no socket open", func(st rtserver.Stats) bool { return st.Open == 0 })
		dials := e.tap.Dials()
		t.Logf("dials at /realtime after the sign-out: %v", dials)

		// 3 s is 30 times the backoff's base: a leader that retried would
		// have dialed by now.
		e.requireNoDial(tabs, len(dials), 3*time.Second, true)

		require.True(t, eval[bool](t, tabs[2], `RT.setUser("bob")`))
		eval[any](t, tabs[2], `RT.conn.retry().then(() => null)`)
		require.NoError(t, harness.Poll(context.Background(), "the leader, asked, to dial and be refused", failoverTimeout, 25*time.Millisecond, func() (bool, error) {
			d := e.tap.Dials()
			return len(d) > len(dials) && d[len(d)-1] != 0 && e.tap.Open() == 0, nil
		}))
		waitConn(t, tabs[:1], "the leader unauthorized: bob's session is not alice's replica's", failoverTimeout, func(_ int, s harness.ConnStatus) bool {
			return s.State == "unauthorized"
		})
		e.waitStats("bob's socket closed", func(st rtserver.Stats) bool { return st.Open == 0 })
		dials = e.tap.Dials()
		e.requireNoDial(tabs, len(dials), 2*time.Second, false)
		waitConn(t, tabs, "every tab unauthorized after bob's refusal", failoverTimeout, func(_ int, s harness.ConnStatus) bool {
			return s.State == "unauthorized"
		})

		e.signInAgain(tabs, 2, 0)
	})
}

// The demo's sign-out (POST /api/signout from a follower: the server
// ends the user's realtime session, closing the leader's socket with
// 4401, and clears the cookie every tab shares): every tab says
// "unauthorized" without a dial, and nobody dials on its own. Signing in
// again in another tab and asking (retry) connects the same leader again.
func TestConnectionSessionEndedLeaderWaitsForRetry(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupConn(t, k, false)
		tabs := e.connTabs(3, harness.ConnOptions{Scope: scope(t), User: connUser})
		require.Equal(t, 0, waitReady(t, tabs), "the first tab leads")
		closed := eval[map[string]float64](t, tabs[1], `fetch("/api/signout", { method: "POST" }).then((r) => r.json())`)
		require.Equal(t, float64(1), closed["closed"], "sockets the server closed at the sign-out: %v", closed)
		waitConn(t, tabs, "every tab unauthorized", failoverTimeout, func(_ int, s harness.ConnStatus) bool { return s.State == "unauthorized" })
		e.waitStats("no socket open", func(st rtserver.Stats) bool { return st.Open == 0 })
		dials := e.tap.Dials()
		e.requireNoDial(tabs, len(dials), 3*time.Second, true)
		e.signInAgain(tabs, 1, 0)
		t.Logf("dials at /realtime: %v", dials)
	})
}

// signInAgain signs connUser in in tabs[from] and asks (retry): every tab
// is ready again under the same leader, with one socket, and an edit
// reaches every tab.
func (e *connEnv) signInAgain(tabs []*harness.Tab, from, leader int) {
	e.t.Helper()
	t := e.t
	require.True(t, eval[bool](t, tabs[from], `RT.setUser("`+connUser+`")`))
	eval[any](t, tabs[from], `RT.conn.retry().then(() => null)`)
	ss := waitConn(t, tabs, "every tab ready again", failoverTimeout, func(_ int, s harness.ConnStatus) bool {
		return s.State == "ready" && s.LastError == nil
	})
	require.Equal(t, []int{leader}, leaderIndexes(ss), "the leader kept its lock throughout")
	e.waitStats("one socket", func(st rtserver.Stats) bool { return st.Open == 1 })
	require.Equal(t, 1, e.tap.Open(), "sockets open, seen by the tap")
	require.NoError(t, tabs[from].Mutate("after", "signed in again"))
	waitAcked(t, tabs[from], "after", failoverTimeout)
	waitDeltas(t, tabs, []string{"after"}, failoverTimeout)
}

// requireNoDial watches for d that no tab dials beyond the first n dials
// and no tab is ready; strict: that every tab stays unauthorized (a
// follower may lag the leader's last state by a message: only when the
// leader's state has settled).
func (e *connEnv) requireNoDial(tabs []*harness.Tab, n int, d time.Duration, strict bool) {
	e.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if got := e.tap.Dials(); len(got) != n {
			e.t.Fatalf("dials %v: the unauthorized leader dialed again on its own", got)
		}
		for i, tab := range tabs {
			s := connStatus(e.t, tab)
			if s.State == "ready" || strict && s.State != "unauthorized" {
				e.t.Fatalf("tab %d left unauthorized on its own: %+v", i, s)
			}
		}
	}
}
