//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// The demo's worker seen from its pages alone (navigator.serviceWorker),
// for the tests that run in every engine: swEnv follows the worker over
// CDP, which Firefox does not offer, and dispatches sync, which Firefox
// does not have.

// swPageEnv is an outbox environment with the demo's worker, observed
// through the pages' registrations.
type swPageEnv struct {
	*obEnv
	scope string // the worker's scope: the demo's root
}

func setupSWPage(t *testing.T, k harness.Kind) *swPageEnv {
	t.Helper()
	e := &swPageEnv{obEnv: setupOutbox(t, k)}
	e.scope = e.url + "/"
	return e
}

// pageWorker is one worker of a registration as a page sees it.
type pageWorker struct {
	ScriptURL string `json:"scriptURL"`
	State     string `json:"state"`
}

// pageRegistration is a Service Worker registration of the page's origin.
type pageRegistration struct {
	Scope      string      `json:"scope"`
	Installing *pageWorker `json:"installing"`
	Waiting    *pageWorker `json:"waiting"`
	Active     *pageWorker `json:"active"`
}

// registrationsJS lists the origin's registrations
// (navigator.serviceWorker.getRegistrations) with their workers.
const registrationsJS = `navigator.serviceWorker.getRegistrations().then((rs) => rs.map((r) => {
	const w = (x) => x ? { scriptURL: x.scriptURL, state: x.state } : null;
	return { scope: r.scope, installing: w(r.installing), waiting: w(r.waiting), active: w(r.active) };
}))`

// registrations reads the origin's registrations from tab.
func registrations(t *testing.T, tab *harness.Tab) []pageRegistration {
	t.Helper()
	return eval[[]pageRegistration](t, tab, registrationsJS)
}

// activeFrom waits until tab sees, at the demo's scope, an activated
// worker whose script URL has schema (0: any), and returns it.
func (e *swPageEnv) activeFrom(tab *harness.Tab, schema int) pageWorker {
	e.t.Helper()
	var last []pageRegistration
	var got pageWorker
	err := harness.Poll(context.Background(), "an activated worker at "+e.scope, swTimeout, 20*time.Millisecond, func() (bool, error) {
		rs, err := harness.Eval[[]pageRegistration](tab, registrationsJS)
		if err != nil {
			return false, err
		}
		last = rs
		for _, r := range rs {
			if r.Scope == e.scope && r.Active != nil && r.Active.State == "activated" && hasSchema(r.Active.ScriptURL, schema) {
				got = *r.Active
				return true, nil
			}
		}
		return false, nil
	})
	require.NoError(e.t, err, "registrations %s", describeRegistrations(last))
	return got
}

func describeRegistrations(rs []pageRegistration) string {
	w := func(p *pageWorker) string {
		if p == nil {
			return "-"
		}
		return p.ScriptURL + " (" + p.State + ")"
	}
	out := ""
	for _, r := range rs {
		out += fmt.Sprintf("[%s: installing %s, waiting %s, active %s] ", r.Scope, w(r.Installing), w(r.Waiting), w(r.Active))
	}
	if out == "" {
		return "none"
	}
	return out
}

// noBackgroundSyncJS is true in a page without Background Sync: no
// SyncManager and no registration.sync.
const noBackgroundSyncJS = `typeof SyncManager === "undefined" && !("sync" in ServiceWorkerRegistration.prototype)`

// withoutBackgroundSync is what a tab runs before it loads the demo to be a
// page without Background Sync: Chromium's is hidden
// (harness.Tab.HideSyncManager); Firefox has none to hide.
func withoutBackgroundSync(k harness.Kind) func(*harness.Tab) error {
	if k == harness.KindChromium {
		return func(tab *harness.Tab) error { return tab.HideSyncManager() }
	}
	return nil
}
