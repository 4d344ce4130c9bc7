//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/e2e/harness"
)

// notesOf lists what the server stored as user's (the demo's GET /api/notes).
func (e *obEnv) notesOf(user string) []server.Note {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.url+"/api/notes", nil)
	req.Header.Set(server.DemoUserHeader, user)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	var notes []server.Note
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&notes))
	return notes
}

// noteIDs are the ids of notes, sorted.
func noteIDs(notes []server.Note) string {
	ids := make([]string, len(notes))
	for i, n := range notes {
		ids[i] = n.ID
	}
	sort.Strings(ids)
	return strings.Join(ids, ",")
}

// foreign reports the first of notes whose id does not start with prefix.
func foreign(notes []server.Note, prefix string) string {
	for _, n := range notes {
		if !strings.HasPrefix(n.ID, prefix) {
			return n.ID
		}
	}
	return ""
}

// One tab switches the user while another tab owns the flush, with
// credentials that follow the browser (a cookie naming the page's current
// user). Nothing of alice's is ever stored as bob's, not even what the tab
// that still shows alice's notes enqueues after the switch; once alice is
// back, each of her records arrives once, as hers.
func TestOutboxSessionSwitchAcrossTabsCookie(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupOutbox(t, k)
		q := scope(t)
		cookie := url.Values{"auth": {"cookie"}}
		a := e.tab(q, "alice", cookie)
		b := e.tab(q, "alice", cookie)
		// A slow server keeps b's flush in flight long enough to switch under
		// it. Each note is its own entity: one refused note does not hold up
		// the others.
		e.ctl.set(func(c *noteCtl) { c.delay = 100 * time.Millisecond })
		enqueue(t, b, "alice", 20)
		require.NoError(t, harness.Poll(context.Background(), "b flushing alice's notes", failoverTimeout, 5*time.Millisecond, func() (bool, error) {
			return len(e.notesOf("alice")) >= 1, nil
		}))
		require.True(t, status(t, b).Leader, "b does not own the flush")
		eval[any](t, a, `tabfenceNotes.switchUser("bob")`)
		enqueue(t, a, "bob", 5)
		// b's page still shows alice's notes, and its user edits them: they are
		// alice's records, whatever the cookie says now.
		enqueue(t, b, "alice-late", 3)
		require.NoError(t, harness.Poll(context.Background(), "bob's five stored", 20*time.Second, 25*time.Millisecond, func() (bool, error) {
			notes := e.notesOf("bob")
			if id := foreign(notes, "bob-"); id != "" {
				t.Fatalf("alice's note %s stored as bob's: %s", id, noteIDs(notes))
			}
			return len(notes) == 5, nil
		}))
		for _, tab := range []*harness.Tab{a, b} {
			waitJS(t, tab, "its flushes to end", flushesEndedJS+`(tabfenceNotes.events)`)
		}
		e.waitIdle()
		bob := e.notesOf("bob")
		require.Equal(t, "", foreign(bob, "bob-"), "bob's notes %s", noteIDs(bob))
		require.Len(t, bob, 5, "bob's notes %s", noteIDs(bob))
		before := len(e.notesOf("alice"))
		require.NotEqual(t, 20, before, "b's flush ended before the switch: the test did not switch under it")
		// Back to alice, from the tab that did not own the flush.
		eval[any](t, a, `tabfenceNotes.switchUser("alice")`)
		err := harness.Poll(context.Background(), "alice's 23 stored", 30*time.Second, 25*time.Millisecond, func() (bool, error) {
			return len(e.notesOf("alice")) == 23, nil
		})
		require.NoError(t, err, "%v: alice %s; bob %s; answers %v; b's events %s", err, noteIDs(e.notesOf("alice")), noteIDs(e.notesOf("bob")), e.answerCounts(), eventSummary(t, b))
		for _, tab := range []*harness.Tab{a, b} {
			waitJS(t, tab, "its flushes to end", flushesEndedJS+`(tabfenceNotes.events)`)
		}
		e.waitIdle()
		alice := e.notesOf("alice")
		for _, n := range alice {
			require.Equal(t, int64(1), n.Effects, "alice's note %+v (want each once)", n)
			require.True(t, strings.HasPrefix(n.ID, "alice-"), "alice's note %+v (want each once)", n)
		}
		bob = e.notesOf("bob")
		require.Len(t, bob, 5, "bob's notes %s", noteIDs(bob))
		require.Equal(t, "", foreign(bob, "bob-"), "bob's notes %s", noteIDs(bob))
		n := e.effects()
		require.Equal(t, 28, n, "effects %d, want 28", n)
		t.Logf("alice's notes stored before switching back: %d; answers by status: %v", before, e.answerCounts())
	})
}

// answerCounts counts the answers to POST /api/notes by status.
func (e *obEnv) answerCounts() map[int]int {
	e.ctl.mu.Lock()
	defer e.ctl.mu.Unlock()
	n := map[int]int{}
	for _, st := range e.ctl.answers {
		for _, s := range st {
			n[s]++
		}
	}
	return n
}

// The tab that holds alice's records flushes only after another tab
// switched to bob (it was offline meanwhile): with the browser's cookie now
// bob's, it must send nothing of alice's; once alice is back they arrive,
// once each, as hers.
func TestOutboxSessionSwitchCookieBeforeStaleTabFlushes(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupOutbox(t, k)
		q := scope(t)
		cookie := url.Values{"auth": {"cookie"}}
		a := e.tab(q, "alice", cookie)
		b := e.tab(q, "alice", cookie)
		offline(t, a, true)
		offline(t, b, true)
		enqueue(t, b, "alice", 10)
		eval[any](t, a, `tabfenceNotes.switchUser("bob")`)
		offline(t, b, false)
		enqueue(t, b, "alice-late", 2) // b's page still shows alice's notes
		// b owns a flush now (a is still offline): under the queue's session,
		// bob's, it has nothing to send.
		eval[any](t, b, `tabfenceNotes.outbox.flush()`)
		notes := e.notesOf("bob")
		require.Empty(t, notes, "alice's notes stored as bob's: %s", noteIDs(notes))
		offline(t, a, false)
		enqueue(t, a, "bob", 3)
		require.NoError(t, harness.Poll(context.Background(), "bob's three stored", 20*time.Second, 25*time.Millisecond, func() (bool, error) {
			notes := e.notesOf("bob")
			if id := foreign(notes, "bob-"); id != "" {
				t.Fatalf("alice's note %s stored as bob's: %s", id, noteIDs(notes))
			}
			return len(notes) == 3, nil
		}))
		for _, tab := range []*harness.Tab{a, b} {
			waitJS(t, tab, "its flushes to end", flushesEndedJS+`(tabfenceNotes.events)`)
		}
		e.waitIdle()
		bob := e.notesOf("bob")
		require.Len(t, bob, 3, "bob's notes %s", noteIDs(bob))
		require.Equal(t, "", foreign(bob, "bob-"), "bob's notes %s", noteIDs(bob))
		if n := len(e.notesOf("alice")); n != 0 {
			t.Fatalf("%d of alice's notes sent while bob was logged in", n)
		}
		eval[any](t, a, `tabfenceNotes.switchUser("alice")`)
		err := harness.Poll(context.Background(), "alice's twelve stored", 30*time.Second, 25*time.Millisecond, func() (bool, error) {
			return len(e.notesOf("alice")) == 12, nil
		})
		require.NoError(t, err, "%v: alice %s; answers %v", err, noteIDs(e.notesOf("alice")), e.answerCounts())
		e.waitIdle()
		for _, n := range e.notesOf("alice") {
			require.Equal(t, int64(1), n.Effects, "alice's note %+v (want each once)", n)
		}
		n := e.effects()
		require.Equal(t, 15, n, "effects %d, want 15", n)
	})
}

// The credentials change (the cookie is bob's) and the page has not logged
// the outbox in as bob yet: the receiver refuses alice's records (403
// session-mismatch). They stay pending for alice, uncharged, and are not
// resent, however often a flush is triggered, until the next login; then
// each arrives once, as hers.
func TestOutboxSessionMismatchHoldsUntilLogin(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupOutbox(t, k)
		q := scope(t)
		a := e.tab(q, "alice", url.Values{"auth": {"cookie"}})
		eval[any](t, a, `document.cookie = "`+server.DemoUserCookie+`=bob; path=/"`)
		enqueue(t, a, "alice", 3)
		waitJS(t, a, "a session mismatch", `tabfenceNotes.events.some(e => e.kind === "outbox.session_mismatch")`)
		waitJS(t, a, "its flushes to end", flushesEndedJS+`(tabfenceNotes.events)`)
		e.waitIdle()
		refused := e.answerCounts()
		require.NotEqual(t, 0, refused[http.StatusForbidden], "answers %v", refused)
		require.Equal(t, 0, refused[http.StatusCreated], "answers %v", refused)
		for i := 0; i < 3; i++ {
			err := eval[string](t, a, `tabfenceNotes.outbox.flush().then(() => "", (e) => e.name)`)
			require.Equal(t, "SessionMismatchError", err, "flush while held")
		}
		enqueue(t, a, "alice-more", 1)
		waitJS(t, a, "its flushes to end", flushesEndedJS+`(tabfenceNotes.events)`)
		e.waitIdle()
		got := e.answerCounts()
		require.Equal(t, refused[http.StatusForbidden], got[http.StatusForbidden], "resent while held: answers %v, before %v", got, refused)
		require.Len(t, got, 1, "resent while held: answers %v, before %v", got, refused)
		st := status(t, a)
		require.Equal(t, 4, st.Pending, "alice's records must wait, uncharged: %+v", st)
		require.Equal(t, 0, st.Failed+st.DeadLetter+st.Terminal, "alice's records must wait, uncharged: %+v", st)
		eval[any](t, a, `tabfenceNotes.switchUser("alice")`)
		err := harness.Poll(context.Background(), "alice's four stored", 20*time.Second, 25*time.Millisecond, func() (bool, error) {
			return len(e.notesOf("alice")) == 4, nil
		})
		require.NoError(t, err, "%v: answers %v", err, e.answerCounts())
		e.waitIdle()
		for _, n := range e.notesOf("alice") {
			require.Equal(t, int64(1), n.Effects, "alice's note %+v (want each once)", n)
		}
		bob := e.notesOf("bob")
		require.Empty(t, bob, "bob's notes %s", noteIDs(bob))
		t.Logf("answers %v", e.answerCounts())
	})
}
