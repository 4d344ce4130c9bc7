//go:build e2e

package e2e

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// A deploy while a page of the old build is open. The old page and the
// first worker are at payload schema 1; a page of the new build (schema 2,
// whose migration adds v: 2 to a note) enqueues before its worker is
// installed: the old worker sends the old records and never the newer
// ones. Then the new worker installs beside the old page and sends what is
// left, the old records migrated: every note once, its text intact, none
// sent twice, and the old page, back online, sends nothing more.
func TestSWNewWorkerVersionBesideAnOldPage(t *testing.T) {
	chromiumOnly(t, "follows two Service Worker versions and dispatches sync (CDP ServiceWorker domain)", func(t *testing.T, k harness.Kind) {
		e := setupSW(t, k)
		q := scope(t)
		old := e.swTab(q, "alice", url.Values{"bgsync": {"0"}, "schema": {"1"}})
		v1 := e.active(1)
		// Both pages open, and go offline, before anything is queued: a page
		// online with queued records flushes them at open (the schema-2 page
		// would send the old records itself, migrated).
		cur := e.tab(q, "alice", url.Values{"bgsync": {"0"}, "schema": {"2"}}) // its worker not installed yet
		offline(t, old, true)
		offline(t, cur, true)
		enqueue(t, old, "old", 5)
		enqueue(t, cur, "new", 5)
		tag := syncTag(t, old)
		require.Equal(t, tag, syncTag(t, cur), "one queue")

		e.dispatch(tag, false)
		e.waitReport(tag, 1)
		e.waitIdle()
		require.Equal(t, 5, e.effects(), "the schema-1 worker sent %d (want the 5 old records, never the newer)", e.effects())
		for id, body := range e.notesBodies() {
			require.Regexp(t, `^old-`, id, "the schema-1 worker sent %s: %v", id, body)
			require.NotContains(t, body, "v", "the schema-1 worker migrated %s: %v", id, body)
		}
		waitVersioned(t, cur, "the new records still queued", func(s obVersioned) bool { return s.Pending == 5 })
		waitVersioned(t, old, "the newer records left alone", func(s obVersioned) bool { return s.Unsupported == 5 })

		// The new build's worker, registered by its page.
		e.detach()
		reg := eval[string](t, cur, `import("/notes-options.js").then((m) => navigator.serviceWorker.register(
		"/sw.js?" + m.workerSearch(new URLSearchParams(location.search)), { type: "module" })).then((r) => r.scope)`)
		require.Equal(t, e.scope, reg, "the new worker's scope")
		v2 := e.active(2)
		require.NotEqual(t, v1.VersionID, v2.VersionID, "a new version")
		enqueue(t, old, "old2", 3) // the old page keeps enqueuing at schema 1

		e.dispatch(tag, false)
		rep := e.waitReport(tag, 1)
		e.waitEffects(13, swTimeout)
		require.Equal(t, "done", rep.Reason, "report %+v", rep)
		e.waitIdle()
		e.requireOncePerKey(13)
		bodies := e.notesBodies()
		for i := 0; i < 3; i++ {
			id := "old2-" + strconv.Itoa(i)
			require.Equal(t, map[string]any{"id": id, "text": "text " + strconv.Itoa(i), "v": float64(2)}, bodies[id], "migrated by the new worker")
		}
		for _, p := range []string{"old", "new"} {
			for i := 0; i < 5; i++ {
				id := p + "-" + strconv.Itoa(i)
				require.Equal(t, "text "+strconv.Itoa(i), bodies[id]["text"], "note %s: %v", id, bodies[id])
			}
		}

		for _, tab := range []*harness.Tab{old, cur} {
			offline(t, tab, false)
		}
		waitVersioned(t, old, "the old page settled", func(s obVersioned) bool { return s.Pending == 0 && s.Unsupported == 0 })
		for _, tab := range []*harness.Tab{old, cur} {
			waitJS(t, tab, "its flushes to end", flushesEndedJS+`(tabfenceNotes.events)`)
		}
		e.waitIdle()
		require.Equal(t, 13, e.effects(), "effects after the pages came back online")
	})
}
