//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// The demo's shared tracker, as a person uses it in two tabs: an issue
// added in one shows in the other, ticked done there shows back here; the
// side panel says which tab holds the connection; edits made while working
// offline show as "saving…" in every tab and are sent once it is off; when
// the tab holding the connection closes, the other says it holds it now,
// with a higher token, and its edits still go through.
func TestDemoTracker(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		s := scope(t)
		user := "ada" // its own server and browser: the screenshot shows a person's name
		a := e.trackerTab(s, user)
		b := e.trackerTab(s, user)
		waitRows(t, "one tab holds the connection", func() bool {
			roles := []string{text(t, a, "rt-role"), text(t, b, "rt-role")}
			slices.Sort(roles)
			return slices.Equal(roles, []string{"Another tab holds the connection", "This tab holds the connection"})
		})
		leader, follower := a, b
		if text(t, b, "rt-role") == "This tab holds the connection" {
			leader, follower = b, a
		}
		waitRows(t, "connected", func() bool { return strings.HasPrefix(text(t, follower, "rt-state"), "Connected") })

		addIssue(t, follower, "Fix login")
		for _, tab := range []*harness.Tab{a, b} {
			waitRows(t, "Fix login in both tabs, saved", func() bool {
				return slices.Equal(rows(t, tab), []string{"Fix login|open|"})
			})
		}
		clickCSS(t, leader, "#issues li input.done")
		waitRows(t, "ticked in the other tab", func() bool { return slices.Equal(rows(t, follower), []string{"Fix login|done|"}) })

		clickCSS(t, leader, "#rt-offline")
		waitRows(t, "offline", func() bool { return strings.HasPrefix(text(t, follower, "rt-state"), "Offline") })
		waitRows(t, "the switch shown on in the other tab", func() bool { return checked(t, follower, "rt-offline") })
		addIssue(t, follower, "Written offline")
		for _, tab := range []*harness.Tab{a, b} {
			waitRows(t, "the offline edit waits, shown in every tab", func() bool {
				return slices.Contains(rows(t, tab), "Written offline|open|saving…") && strings.HasPrefix(text(t, tab, "rt-pending"), "1 edit")
			})
		}
		screenshot(t, follower) // the README's: the list, an edit waiting, the panel
		clickCSS(t, leader, "#rt-offline")
		waitRows(t, "the switch shown off in the other tab", func() bool { return !checked(t, follower, "rt-offline") })
		for _, tab := range []*harness.Tab{a, b} {
			waitRows(t, "sent once the switch is off", func() bool {
				return slices.Equal(rows(t, tab), []string{"Fix login|done|", "Written offline|open|"}) && text(t, tab, "rt-pending") == "nothing"
			})
		}

		token := eval[float64](t, follower, `tabfenceTracker.status.token`)
		leader.Close()
		waitRows(t, "the other tab takes the connection over", func() bool {
			return text(t, follower, "rt-role") == "This tab holds the connection" &&
				strings.HasPrefix(text(t, follower, "rt-state"), "Connected") &&
				eval[float64](t, follower, `tabfenceTracker.status.token`) > token
		})
		addIssue(t, follower, "After the failover")
		waitRows(t, "sent by the new holder", func() bool {
			return slices.Equal(rows(t, follower), []string{"Fix login|done|", "Written offline|open|", "After the failover|open|"})
		})
	})
}

// trackerTab opens the demo as user and waits until its tracker is up.
func (e *env) trackerTab(scope, user string) *harness.Tab {
	e.t.Helper()
	tab, err := e.b.Open(e.pageURL("", scope, 1) + "&" + url.Values{"user": {user}}.Encode())
	require.NoError(e.t, err)
	e.t.Cleanup(tab.Close)
	err = harness.Poll(context.Background(), "tracker ready", startTimeout, 20*time.Millisecond, func() (bool, error) {
		return harness.Eval[bool](tab, `!!(window.tabfenceTracker && (tabfenceTracker.ready || tabfenceTracker.error))`)
	})
	require.NoError(e.t, err)
	require.Equal(e.t, "", eval[string](e.t, tab, `tabfenceTracker.error ? String(tabfenceTracker.error) : ""`), "the tracker started")
	return tab
}

// rows are the issues a tab shows: "title|open or done|saving… or deleting… or empty".
func rows(t *testing.T, tab *harness.Tab) []string {
	t.Helper()
	raw := eval[string](t, tab, `JSON.stringify([...document.querySelectorAll("#issues li")].map((li) =>
		li.querySelector(".title").value + "|" + (li.querySelector("input.done").checked ? "done" : "open") + "|" +
		(li.querySelector(".saving")?.textContent ?? "")))`)
	var out []string
	require.NoError(t, json.Unmarshal([]byte(raw), &out))
	return out
}

func addIssue(t *testing.T, tab *harness.Tab, title string) {
	t.Helper()
	q, err := json.Marshal(title)
	require.NoError(t, err)
	eval[any](t, tab, `document.getElementById("issue-title").value = `+string(q)+`; document.getElementById("issue-form").requestSubmit(); null`)
}

// checked is whether the checkbox id is ticked.
func checked(t *testing.T, tab *harness.Tab, id string) bool {
	t.Helper()
	return eval[bool](t, tab, `document.getElementById(`+strconv.Quote(id)+`).checked`)
}

func clickCSS(t *testing.T, tab *harness.Tab, sel string) {
	t.Helper()
	require.NoError(t, tab.Click(sel), "click %s", sel)
}

func waitRows(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := harness.Poll(context.Background(), what, failoverTimeout, 20*time.Millisecond, func() (bool, error) { return cond(), nil })
	require.NoError(t, err)
}

// A mutation the server refuses rejects the caller's promise with a
// MutationRejectedError carrying the server's problem, and leaves nothing
// pending.
func TestDemoTrackerRefusedMutation(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		s := scope(t)
		tab := e.trackerTab(s, "tracker-"+s)
		got := eval[map[string]any](t, tab, `tabfenceTracker.conn.mutate({op: "issue.fly", payload: {id: "x"}}).then(
		(ack) => ({resolved: true, ack}),
		(err) => ({name: err.name, isError: err instanceof Error, type: err.problem && err.problem.type, status: err.problem && err.problem.status}))`)
		require.Equal(t, "MutationRejectedError", got["name"], "%v", got)
		require.Equal(t, true, got["isError"])
		typ, _ := got["type"].(string)
		require.True(t, strings.HasSuffix(typ, "unknown-op"), "the server's problem type: %v", got)
		require.Equal(t, 422.0, got["status"])
		waitRows(t, "nothing pending", func() bool { return eval[float64](t, tab, `tabfenceTracker.conn.status().pending`) == 0 })
	})
}
