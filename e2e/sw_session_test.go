//go:build e2e

package e2e

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// The session check holds in the worker: it sends only the records of the
// user the queue is logged in as (its headers come from the app's hook, per
// record's user), and after a logout it sends nothing and asks no retry.
func TestSWSendsOnlyTheSessionsUser(t *testing.T) {
	chromiumOnly(t, "dispatches sync to the Service Worker and reads its reports (CDP ServiceWorker domain)", func(t *testing.T, k harness.Kind) {
		e := setupSW(t, k)
		q := scope(t)
		tab := e.swTab(q, "alice", url.Values{"bgsync": {"0"}})
		e.active(1)
		offline(t, tab, true)
		enqueue(t, tab, "alice", 3)
		eval[any](t, tab, `tabfenceNotes.outbox.logout({purge: false})`)
		eval[any](t, tab, `tabfenceNotes.outbox.login("bob")`)
		enqueue(t, tab, "bob", 2)
		tag := syncTag(t, tab)
		tab.Close()

		e.dispatch(tag, false)
		rep := e.waitReport(tag, 1)
		e.waitIdle()
		e.ctl.mu.Lock()
		alice, bob := e.ctl.byUser["alice"], e.ctl.byUser["bob"]
		e.ctl.mu.Unlock()
		require.Equal(t, 0, alice, "requests as alice after her logout (report %+v)", rep)
		require.Equal(t, 2, bob, "requests as bob (report %+v)", rep)
		require.Equal(t, "done", rep.Reason, "report %+v", rep)
		e.requireOncePerKey(2)

		tab = e.tab(q, "bob", url.Values{"bgsync": {"0"}})
		eval[any](t, tab, `tabfenceNotes.outbox.logout({purge: false})`)
		tab.Close()
		since := harness.NowMs()
		e.dispatch(tag, false)
		rep = e.waitReportSince(tag, since)
		require.Equal(t, "no-session", rep.Reason, "report %+v", rep)
		require.False(t, rep.Retry, "report %+v", rep)
		e.waitIdle()
		e.ctl.mu.Lock()
		alice = e.ctl.byUser["alice"]
		e.ctl.mu.Unlock()
		require.Equal(t, 0, alice, "requests as alice without a session")
		require.Equal(t, 2, e.effects(), "effects without a session")
	})
}
