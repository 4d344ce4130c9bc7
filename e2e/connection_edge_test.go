//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/cdproto/storage"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// The connection's edges: the browser closing its database, a bad mutation.

// The browser closes the replica's database (site data cleared, as a
// person does from the browser's settings): every tab's connection ends as
// "storage-closed", not "deleted" (nobody signed out).
func TestConnectionStorageClosed(t *testing.T) {
	chromiumOnly(t, "clears the site's IndexedDB under open tabs: Storage.clearDataForOrigin is CDP-only", func(t *testing.T, k harness.Kind) {
		e := setupConn(t, k, false)
		tabs := e.connTabs(2, harness.ConnOptions{Scope: scope(t)})
		waitReady(t, tabs)
		tctx, err := tabs[0].CDP()
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(tctx, 10*time.Second)
		defer cancel()
		_, err = chromedp.Call(ctx, storage.ClearDataForOrigin, storage.ClearDataForOriginParams{
			Origin: e.srv.URL, StorageTypes: "indexeddb"})
		require.NoError(t, err)
		waitConn(t, tabs, "every tab closed (storage-closed)", failoverTimeout, func(_ int, s harness.ConnStatus) bool {
			return s.State == "closed" && s.Closed != nil && *s.Closed == "storage-closed"
		})
	})
}

// A mutation the wire cannot carry (a payload over half a message) is the
// caller's bug: mutate() rejects with a TypeError and nothing is pending.
func TestConnectionBadMutationTypeError(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupConn(t, k, false)
		tabs := e.connTabs(1, harness.ConnOptions{Scope: scope(t)})
		waitReady(t, tabs)
		got := eval[string](t, tabs[0], `RT.conn.mutate({ op: "issue.put", payload: "x".repeat(600000) }).then(() => "resolved", (e) => e.name)`)
		require.Equal(t, "TypeError", got)
		require.Equal(t, 0, connStatus(t, tabs[0]).Pending, "a refused mutation is not pending")
	})
}
