//go:build e2e

package harness

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/serviceworker"
	"github.com/stretchr/testify/require"
)

// A trivial worker: it counts its sync events in self.__syncs and reports
// each to the server (GET /hit?tag=&last=), so the test sees the event
// whether or not a tab is open.
const trivialSW = `self.__syncs = [];
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("sync", (e) => {
	self.__syncs.push({ tag: e.tag, lastChance: e.lastChance });
	e.waitUntil(fetch("/hit?tag=" + encodeURIComponent(e.tag) + "&last=" + e.lastChance));
});`

const trivialPage = `<!doctype html><script>
window.swReady = navigator.serviceWorker.register("/sw.js").then(() => navigator.serviceWorker.ready).then(() => true);
</script>`

type hits struct {
	mu   sync.Mutex
	seen []string // tag + " " + last
}

func (h *hits) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

func (h *hits) wait(t *testing.T, n int) []string {
	t.Helper()
	require.NoError(t, Poll(context.Background(), "sync hits", SWTimeout, 10*time.Millisecond, func() (bool, error) {
		return len(h.list()) >= n, nil
	}))
	return h.list()
}

// The harness against a trivial worker: it sees the worker installed and
// active, dispatches sync events with a tag and lastChance, also after every
// tab of the origin closed, stops the worker (the next event starts a fresh
// one), evaluates in the worker, and hides SyncManager from a page.
func TestServiceWorkers(t *testing.T) {
	h := &hits{}
	mux := http.NewServeMux()
	mux.HandleFunc("/sw.js", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = w.Write([]byte(trivialSW))
	})
	mux.HandleFunc("/hit", func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, r.URL.Query().Get("tag")+" "+r.URL.Query().Get("last"))
		h.mu.Unlock()
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(trivialPage))
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	scope := ts.URL + "/"

	b, err := Start(context.Background(), Options{})
	require.NoError(t, err)
	defer b.Close()
	sw, err := b.ServiceWorkers()
	require.NoError(t, err)
	tab, err := b.Open(scope)
	require.NoError(t, err)
	ok, err := Eval[bool](tab, `window.swReady`)
	require.NoError(t, err)
	require.True(t, ok)
	v, err := sw.WaitActive(context.Background(), scope, nil)
	require.NoError(t, err)
	require.Equal(t, ts.URL+"/sw.js", v.ScriptURL)

	require.NoError(t, sw.DispatchSync(context.Background(), scope, "one", false))
	require.Equal(t, []string{"one false"}, h.wait(t, 1))

	// Every tab of the origin closed: the worker is still driven.
	tab.Close()
	require.NoError(t, sw.DispatchSync(context.Background(), scope, "two", true))
	require.Equal(t, []string{"one false", "two true"}, h.wait(t, 2))
	w, err := sw.Attach(context.Background(), scope)
	require.NoError(t, err)
	n, err := EvalWorker[int](w, `self.__syncs.length`)
	require.NoError(t, err)
	require.Equal(t, 2, n, "events in the worker's life")
	w.Close()

	// Stopped: the next event starts a new life, with nothing of the old.
	v, _ = Active(sw.Versions(scope))
	require.NoError(t, sw.Stop(context.Background(), v))
	v, _ = Active(sw.Versions(scope))
	require.Equal(t, serviceworker.VersionRunningStatusStopped, v.Running)
	require.NoError(t, sw.DispatchSync(context.Background(), scope, "three", false))
	require.Equal(t, "three false", h.wait(t, 3)[2])
	w, err = sw.Attach(context.Background(), scope)
	require.NoError(t, err)
	defer w.Close()
	syncs, err := EvalWorker[[]struct{ Tag string }](w, `self.__syncs`)
	require.NoError(t, err)
	require.Len(t, syncs, 1, "events since the stop: %+v", syncs)
	require.Equal(t, "three", syncs[0].Tag)
	rs, err := w.SyncReports()
	require.NoError(t, err)
	require.Empty(t, rs, "a worker without the tabfence entry has no reports")

	// SyncManager hidden before the page's scripts run; the worker stays.
	hidden, err := b.NewTab()
	require.NoError(t, err)
	defer hidden.Close()
	require.NoError(t, hidden.HideSyncManager())
	require.NoError(t, hidden.Navigate(scope))
	got, err := Eval[[]bool](hidden, `window.swReady.then(() => navigator.serviceWorker.getRegistration()).then((r) =>
		[typeof SyncManager === "undefined", !("sync" in r), !!r.active])`)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true}, got, "SyncManager gone, registration.sync gone, worker active")
}
