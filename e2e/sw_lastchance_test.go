//go:build e2e

package e2e

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// A 5xx storm during the browser's last sync attempt (lastChance): the
// worker asks for no retry (there is none), nothing is lost or dead: the
// records stay queued, visible in a tab opened afterwards; when the storm
// ends, the tab's own triggers send each once.
func TestSWLastChanceStorm(t *testing.T) {
	chromiumOnly(t, "dispatches last-chance sync events to the Service Worker (CDP ServiceWorker domain)", func(t *testing.T, k harness.Kind) {
		e := setupSW(t, k)
		q := scope(t)
		extra := url.Values{"bgsync": {"0"}, "maxAttempts": {"50"}, "backoffCap": {"2000"}}
		tab := e.swTab(q, "alice", extra)
		e.active(1)
		offline(t, tab, true)
		const n = 10
		enqueue(t, tab, "f", n)
		tag := syncTag(t, tab)
		tab.Close()

		e.ctl.set(func(c *noteCtl) { c.fail500 = 1 << 30 })
		e.dispatch(tag, true)
		rep := e.waitReport(tag, 1)
		require.True(t, rep.LastChance, "report %+v", rep)
		require.False(t, rep.Retry, "the last chance asked for a retry: %+v", rep)
		require.Equal(t, "more", rep.Reason, "report %+v", rep)
		require.Equal(t, n, rep.Remaining, "report %+v", rep)
		require.Zero(t, rep.DeadLettered, "report %+v", rep)
		require.Positive(t, rep.Retried, "the storm never reached the worker: %+v", rep)
		e.waitIdle()
		require.Equal(t, 0, e.effects(), "effects during the storm")

		later := e.tab(q, "alice", extra)
		st := waitStatus(t, later, "the records visible", 10*time.Second, func(s obStatus) bool { return s.Sending == 0 })
		require.Equal(t, n, st.Pending+st.Failed, "records after the last chance: %+v", st)
		require.Zero(t, st.DeadLetter, "records after the last chance: %+v", st)
		require.Zero(t, st.Acked, "records after the last chance: %+v", st)

		e.ctl.set(func(c *noteCtl) { c.fail500 = 0 })
		e.waitEffects(n, swTimeout)
		waitStatus(t, later, "all acked", swTimeout, func(s obStatus) bool { return s.Acked == n && s.Pending+s.Sending+s.Failed == 0 })
		e.waitIdle()
		e.requireOncePerKey(n)
		t.Logf("last chance in a storm: %+v; then sent once each by the tab", rep)
	})
}
