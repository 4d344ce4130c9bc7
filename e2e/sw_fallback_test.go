//go:build e2e

package e2e

import (
	"context"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// A browser without Background Sync (Firefox, Safari; in Chromium,
// SyncManager and registration.sync hidden before the page's scripts run):
// enqueues resolve at once, also before any worker is installed (nothing
// waits for one), and the tab's own triggers send everything when the
// network returns: the tab owns the queue, not a worker. The worker is
// read from the pages (swPageEnv), so the test runs in every engine.
func TestSWNoSyncManagerForegroundFlushes(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupSWPage(t, k)
		q := scope(t)
		noSync := withoutBackgroundSync(k)
		// No worker yet: navigator.serviceWorker.ready would never settle.
		bare := e.tabWith(q, "alice", url.Values{"sw": {"0"}}, noSync)
		require.Empty(t, registrations(t, bare), "a worker is registered")
		require.True(t, eval[bool](t, bare, noBackgroundSyncJS), "Background Sync in the page (%s hides it: %v)", k, noSync != nil)
		offline(t, bare, true)
		took := timedEnqueue(t, bare, "d0", 10)
		require.Less(t, took, 5*time.Second, "10 enqueues without a worker took %v", took)

		// With the worker installed and active, still no Background Sync.
		// The tab loads its page online with d0 queued, so it may rightly
		// send some of d0 before it goes offline; nothing of d1, enqueued
		// offline, may leave until the network returns.
		tab := e.tabWith(q, "alice", url.Values{"sw": {"1"}}, noSync)
		w := e.activeFrom(tab, 1)
		require.True(t, eval[bool](t, tab, noBackgroundSyncJS), "Background Sync beside the worker %s", w.ScriptURL)
		offline(t, tab, true)
		took2 := timedEnqueue(t, tab, "d1", 10)
		require.Less(t, took2, 5*time.Second, "10 enqueues beside a worker took %v", took2)
		early := e.effectsLog()
		for _, ef := range early {
			require.NotContains(t, string(ef.Body), `"d1-`, "sent while offline: %s", ef.Body)
		}

		offline(t, tab, false) // "online": the tab's own trigger
		e.waitEffects(20, swTimeout)
		st := waitStatus(t, tab, "all acked", 10*time.Second, func(s obStatus) bool { return s.Acked == 20 && s.Pending+s.Sending+s.Failed == 0 })
		e.waitIdle()
		e.requireOncePerKey(20)
		e.requireFencesNeverBack()
		id := eval[string](t, tab, `tabfenceNotes.outbox.id`)
		require.Equal(t, id, st.OwnerID, "the queue was flushed by %q, not the tab %q (status %+v)", st.OwnerID, id, st)
		t.Logf("without SyncManager: 10 enqueues in %v without a worker, %v beside one (%s); %d of d0 sent by the tab as it loaded, the rest by its online trigger", took, took2, w.ScriptURL, len(early))
	})
}

// timedEnqueue enqueues n notes and returns how long the enqueues took.
func timedEnqueue(t *testing.T, tab *harness.Tab, prefix string, n int) time.Duration {
	t.Helper()
	start := time.Now()
	enqueue(t, tab, prefix, n)
	return time.Since(start)
}

// A page registers the queue's sync tag after an enqueue: the tag is the
// queue's (its lock name) and registration.sync.getTags() lists it. (The
// server fails every request, so the event the browser fires at once asks
// for a retry and the registration stays listed.)
func TestSWPagesRegisterTheTag(t *testing.T) {
	chromiumOnly(t, "lists registration.sync tags: Background Sync (SyncManager) is Chromium's, Firefox has none", func(t *testing.T, k harness.Kind) {
		e := setupSW(t, k)
		q := scope(t)
		tab := e.swTab(q, "alice", nil)
		e.active(1)
		e.ctl.set(func(c *noteCtl) { c.fail500 = 1 << 30 })
		offline(t, tab, true)
		tag := syncTag(t, tab)
		require.Equal(t, "tabfence:outbox-"+q+":v1", tag, "the queue's lock name")
		enqueue(t, tab, "g", 1)
		var tags []string
		err := harness.Poll(context.Background(), "the sync tag registered", swTimeout, 50*time.Millisecond, func() (bool, error) {
			tags = eval[[]string](t, tab, `navigator.serviceWorker.getRegistration().then((r) => r.sync.getTags())`)
			return slices.Contains(tags, tag), nil
		})
		require.NoError(t, err, "tags %q, want %q", tags, tag)
		require.Equal(t, 0, e.effects(), "effects "+strconv.Itoa(e.effects()))
	})
}
