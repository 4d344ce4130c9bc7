//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// The demo as a visitor opens it (no parameters) has background sync on:
// the page registers the demo's worker, a module worker at /sw.js with the
// scope of the whole demo, and says so under the hood.
func TestSWDemoIndexRegistersTheWorker(t *testing.T) {
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
