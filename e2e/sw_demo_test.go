//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// The demo as a visitor opens it (no parameters) registers the demo's
// worker, a module worker at /sw.js with the scope of the whole demo, as
// the page sees it (navigator.serviceWorker), in every engine. In Firefox,
// which has no Background Sync, the page says so: its tabs send.
func TestSWDemoIndexRegistersTheWorker(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupSWPage(t, k)
		tab, err := e.b.Open(e.url + "/")
		require.NoError(t, err)
		t.Cleanup(tab.Close)
		w := e.activeFrom(tab, 1)
		require.Equal(t, e.url+"/sw.js", w.ScriptURL, "the worker of a page without parameters")
		// Chromium's "on: ..." is TestSWDemoIndexHasBackgroundSync's.
		shows := func(text string) bool { return strings.HasPrefix(text, "registered | ") }
		if k == harness.KindFirefox {
			require.True(t, eval[bool](t, tab, noBackgroundSyncJS), "Firefox has Background Sync")
			shows = func(text string) bool { return text == "registered | no Background Sync in this browser: tabs send" }
		}
		var text string
		err = harness.Poll(context.Background(), "the page to show its worker registered", startTimeout, 20*time.Millisecond, func() (bool, error) {
			var err error
			text, err = harness.Eval[string](tab, `window.tabfenceNotes.sw + " | " + document.getElementById("ob-sync").textContent`)
			return err == nil && shows(text), err
		})
		require.NoError(t, err, "page says %q", text)
	})
}

// In Chromium the demo as a visitor opens it has background sync on: the
// worker (as CDP sees it) is the demo's, and the page says so under the
// hood.
func TestSWDemoIndexHasBackgroundSync(t *testing.T) {
	chromiumOnly(t, "expects the demo's Background Sync on (Chromium's SyncManager) and reads the worker version from the CDP ServiceWorker domain", func(t *testing.T, k harness.Kind) {
		e := setupSW(t, k)
		tab, err := e.b.Open(e.url + "/")
		require.NoError(t, err)
		t.Cleanup(tab.Close)
		v := e.active(1)
		require.Equal(t, e.url+"/sw.js", v.ScriptURL, "the worker of a page without parameters")
		var text string
		err = harness.Poll(context.Background(), "the page to show background sync", startTimeout, 20*time.Millisecond, func() (bool, error) {
			var err error
			text, err = harness.Eval[string](tab, `window.tabfenceNotes.sw + " | " + document.getElementById("ob-sync").textContent`)
			return err == nil && text == "registered | on: the Service Worker sends what is left when every tab is closed", err
		})
		require.NoError(t, err, "page says %q", text)
	})
}
