//go:build e2e

package e2e

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// The server resets a browser that fell behind what it still holds: the
// browser is switched offline while another browser of the same user
// (another scope: its own replica and socket) makes two edits, and the
// server reaps its change rows. Back online, the leader's hello is answered
// with a reset; it reloads the replica from the snapshot URL, and every
// tab's replica holds every issue (without the snapshot it would be empty).
func TestConnectionResetReloadsSnapshot(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupConn(t, k, false)
		o := harness.ConnOptions{Scope: scope(t), Snapshot: "/realtime/snapshot"}
		tabs := e.connTabs(2, o)
		waitReady(t, tabs)
		require.NoError(t, tabs[1].Mutate("before", "seen live"))
		waitAcked(t, tabs[1], "before", failoverTimeout)
		want := map[string]string{"before": "seen live"}
		waitIssues(t, tabs, want, failoverTimeout)

		require.True(t, eval[bool](t, tabs[0], `RT.conn.setOffline(true).then(() => true)`))
		waitConn(t, tabs, "every tab offline", failoverTimeout, func(_ int, s harness.ConnStatus) bool { return s.State == "offline" })
		other := e.connTab(harness.ConnOptions{Scope: scope(t)}, false)
		waitReady(t, []*harness.Tab{other})
		for _, k := range []string{"missed-1", "missed-2"} {
			require.NoError(t, other.Mutate(k, "made elsewhere"))
			waitAcked(t, other, k, failoverTimeout)
			want[k] = "made elsewhere"
		}
		n, err := e.srv.ReapChanges(context.Background(), 0)
		require.NoError(t, err)
		require.Positive(t, n, "no change rows reaped")

		require.True(t, eval[bool](t, tabs[1], `RT.conn.setOffline(false).then(() => true)`))
		waitIssues(t, tabs, want, failoverTimeout)
		reloads, err := tabs[1].ConnReloads()
		require.NoError(t, err)
		require.NotEmpty(t, reloads, "the reset reached the tabs without a reload")
		lead := waitReady(t, tabs)
		require.Equal(t, float64(3), connStatus(t, tabs[lead]).Version, "the replica is at the server's head")
	})
}
