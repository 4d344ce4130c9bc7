//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// entryWorker is a module Service Worker of its own around the worker
// entry: bad options and a second call throw, the app's own sync listener
// sees every tag.
const entryWorker = `import { backgroundSync } from "/dist/tabfence-sw.js";
const errors = (self.__entryErrors = {});
const seen = (self.__entrySeen = []);
self.addEventListener("sync", (e) => seen.push(e.tag));
const opts = { name: "entry", endpoint: "/api/notes", headers: (u) => ({ "X-Demo-User": u }),
  policies: { "put-note": { dedupe: "append" } } };
const t = (k, f) => { try { f(); errors[k] = "ok"; } catch (e) { errors[k] = e.name + ": " + e.message; } };
t("bad", () => backgroundSync({ outboxes: [] }));
t("first", () => backgroundSync({ outboxes: opts, onReport: (r) => (self.__entryReport = r) }));
t("twice", () => backgroundSync({ outboxes: [opts] }));
self.addEventListener("install", () => self.skipWaiting());
`

// The worker entry in a module Service Worker of headless Chromium: it
// throws for bad options and a second call, leaves sync tags that are not
// tabfence's (and a queue it was not given) alone, and for its queue's tag
// loads the runtime in the worker (no document, no window), caches the
// module, opens the queue passive and drains it (no session here: nothing
// to send, no retry), reporting to onReport and self.__tabfenceSync.
func TestSWEntryInAWorker(t *testing.T) {
	chromiumOnly(t, "dispatches sync to the worker entry and evaluates in the worker (CDP ServiceWorker domain)", func(t *testing.T, k harness.Kind) {
		sws, w, sc := entryWorkerUp(t, k)
		errs, err := harness.EvalWorker[map[string]string](w, `self.__entryErrors`)
		require.NoError(t, err)
		require.Equal(t, map[string]string{
			"bad":   "TypeError: tabfence/sw: outboxes must be the outbox options (an object or an array of them)",
			"first": "ok",
			"twice": "TypeError: tabfence/sw: backgroundSync called twice",
		}, errs)

		const tag = "tabfence:outbox-entry:v1"
		for _, d := range []struct {
			tag  string
			last bool
		}{{"app-tag", false}, {"tabfence:outbox-entry:v9", false}, {tag, false}, {tag, true}} {
			require.NoError(t, sws.DispatchSync(context.Background(), sc, d.tag, d.last))
		}
		var reps []harness.SyncReport
		require.NoError(t, harness.Poll(t.Context(), "two reports", 60*time.Second, 50*time.Millisecond, func() (bool, error) {
			reps, err = w.SyncReports()
			return len(reps) == 2, err
		}), "worker errors: %v", sws.Errors())
		seen, err := harness.EvalWorker[[]string](w, `self.__entrySeen`)
		require.NoError(t, err)
		require.ElementsMatch(t, []string{"app-tag", "tabfence:outbox-entry:v9", tag, tag}, seen)
		// The two drains run at once: they may end in either order.
		var last []bool
		for _, r := range reps {
			require.Equal(t, tag, r.Tag, "a report for another tag: %+v", reps)
			require.Equal(t, "no-session", r.Reason, "%+v", r)
			require.False(t, r.Retry)
			last = append(last, r.LastChance)
		}
		require.ElementsMatch(t, []bool{false, true}, last, "%+v", reps)
		onReport, err := harness.EvalWorker[map[string]any](w, `self.__entryReport`)
		require.NoError(t, err)
		require.Equal(t, tag, onReport["tag"])
		require.Equal(t, reps[1].LastChance, onReport["lastChance"], "onReport has the last report")
		cached, err := harness.EvalWorker[[]string](w, `caches.open("tabfence-runtime").then((c) => c.keys()).then((ks) => ks.map((r) => new URL(r.url).pathname))`)
		require.NoError(t, err)
		require.Equal(t, []string{"/dist/tabfence.wasm"}, cached)
		noPage, err := harness.EvalWorker[bool](w, `typeof document === "undefined" && typeof window === "undefined" && typeof self.__tabfence_v1 === "object"`)
		require.NoError(t, err)
		require.True(t, noPage, "the runtime runs in the worker")
		require.Empty(t, sws.Errors())
	})
}

// A bad module in the worker's cache (a broken deploy's answer stored
// earlier) fails one event, which asks for a retry, and is deleted: the
// next event fetches the module again, loads and drains.
func TestSWEntryDropsABadCachedModule(t *testing.T) {
	chromiumOnly(t, "dispatches sync to the worker entry and evaluates in the worker (CDP ServiceWorker domain)", func(t *testing.T, k harness.Kind) {
		sws, w, sc := entryWorkerUp(t, k)
		loader, err := os.ReadFile("../dist/tabfence.js")
		require.NoError(t, err)
		wasm := regexp.MustCompile(`tabfence\.wasm\?v=[0-9a-f]+`).Find(loader) // the module's versioned URL
		require.NotNil(t, wasm)
		_, err = harness.EvalWorker[bool](w, `caches.open("tabfence-runtime").then((c) => c.put("/dist/`+string(wasm)+`",
		new Response("not a module", {headers: {"Content-Type": "application/wasm"}}))).then(() => true)`)
		require.NoError(t, err)
		const tag = "tabfence:outbox-entry:v1"
		var reps []harness.SyncReport
		for n := 1; n <= 2; n++ {
			require.NoError(t, sws.DispatchSync(context.Background(), sc, tag, false))
			require.NoError(t, harness.Poll(t.Context(), "a report", 60*time.Second, 50*time.Millisecond, func() (bool, error) {
				reps, err = w.SyncReports()
				return len(reps) == n, err
			}), "worker errors: %v", sws.Errors())
		}
		require.Equal(t, "error", reps[0].Reason, "%+v", reps)
		require.True(t, reps[0].Retry, "%+v", reps)
		require.Equal(t, "no-session", reps[1].Reason, "the next event loaded from the network: %+v", reps)
		require.NoError(t, harness.Poll(t.Context(), "the network's module stored again", 10*time.Second, 50*time.Millisecond, func() (bool, error) {
			size, err := harness.EvalWorker[int](w, `caches.open("tabfence-runtime").then((c) => c.match("/dist/`+string(wasm)+`")).then((r) => r ? r.arrayBuffer() : new ArrayBuffer(0)).then((b) => b.byteLength)`)
			return size > 1000, err
		}))
	})
}

// A lockWaitMs the drain refuses is bad configuration: each event reports
// it (reason "error") and asks for no retry, which would fail the same way.
func TestSWEntryBadLockWaitNotRetried(t *testing.T) {
	chromiumOnly(t, "dispatches sync to the worker entry and reads its reports (CDP ServiceWorker domain)", func(t *testing.T, k harness.Kind) {
		sws, w, sc := workerUp(t, k, `import { backgroundSync } from "/dist/tabfence-sw.js";
backgroundSync({ outboxes: { name: "entry", endpoint: "/api/notes" }, lockWaitMs: 0 });
self.addEventListener("install", () => self.skipWaiting());
`)
		require.NoError(t, sws.DispatchSync(context.Background(), sc, "tabfence:outbox-entry:v1", false))
		var reps []harness.SyncReport
		var err error
		require.NoError(t, harness.Poll(t.Context(), "a report", 60*time.Second, 50*time.Millisecond, func() (bool, error) {
			reps, err = w.SyncReports()
			return len(reps) == 1, err
		}), "worker errors: %v", sws.Errors())
		require.Equal(t, "error", reps[0].Reason, "%+v", reps)
		require.False(t, reps[0].Retry, "a bad configuration retried: %+v", reps)
	})
}

// entryWorkerUp installs entryWorker in a fresh server and attaches to it.
func entryWorkerUp(t *testing.T, k harness.Kind) (*harness.ServiceWorkers, *harness.Worker, string) {
	return workerUp(t, k, entryWorker)
}

// workerUp installs a module worker script at /entry-sw.js of a fresh
// server and attaches to it.
func workerUp(t *testing.T, k harness.Kind, script string) (*harness.ServiceWorkers, *harness.Worker, string) {
	t.Helper()
	e := setupServing(t, k, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/entry-sw.js" {
				w.Header().Set("Content-Type", "text/javascript")
				_, _ = w.Write([]byte(script))
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	sws, err := e.b.ServiceWorkers()
	require.NoError(t, err)
	tab := e.open("raw-locks.html", scope(t), 1, "waiting")
	eval[bool](t, tab, `navigator.serviceWorker.register("/entry-sw.js", {type: "module"}).then(() => true)`)
	sc := e.srv.URL + "/"
	_, err = sws.WaitActive(context.Background(), sc, func(s string) bool { return strings.HasSuffix(s, "/entry-sw.js") })
	require.NoError(t, err, "worker errors: %v", sws.Errors())
	w, err := sws.Attach(context.Background(), sc)
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return sws, w, sc
}
