//go:build e2e

package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// The demo's buttons do what they say, and the page shows it: Steal in the
// follower, Resign in the leader, Leave and Join.
func TestDemoButtons(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		s := scope(t)
		a := e.demo(s, 1, "leader")
		b := e.demo(s, 1, "follower")
		waitRole(t, a, "leader")
		waitRole(t, b, "follower")
		openHood(t, a) // the election's buttons are under "Under the hood"
		openHood(t, b)
		require.Equal(t, "tabfence:"+s+":v1", text(t, a, "lock"), "#lock shows")

		click(t, b, "steal")
		waitRole(t, b, "leader")
		waitRole(t, a, "follower")

		click(t, b, "resign")
		waitRole(t, a, "leader")
		waitRole(t, b, "follower")
		got := text(t, a, "generation")
		require.Equal(t, "2", got, "#generation shows %q after leading twice", got)

		click(t, a, "leave")
		waitRole(t, a, "left")
		waitRole(t, b, "leader")
		got = text(t, a, "leave")
		require.Equal(t, "Join", got, "#leave says %q after leaving", got)
		click(t, a, "leave")
		waitRole(t, a, "follower")
	})
}

// openHood opens the page's "Under the hood" section, as a user clicks it.
func openHood(t *testing.T, tab *harness.Tab) {
	t.Helper()
	require.NoError(t, tab.Click("details.hood > summary"), "open Under the hood")
}

// screenshot writes the README's picture of tab when TABFENCE_SCREENSHOT
// names a file.
func screenshot(t *testing.T, tab *harness.Tab) {
	path := os.Getenv("TABFENCE_SCREENSHOT")
	if path == "" {
		return
	}
	png, err := tab.Screenshot()
	if err == nil {
		err = os.WriteFile(path, png, 0o644)
	}
	if err != nil {
		t.Log("screenshot:", err)
	}
}

func text(t *testing.T, tab *harness.Tab, id string) string {
	t.Helper()
	return eval[string](t, tab, `document.getElementById("`+id+`").textContent`)
}

func click(t *testing.T, tab *harness.Tab, id string) {
	t.Helper()
	require.NoError(t, tab.Click("#"+id), "click #%s", id)
}

func waitRole(t *testing.T, tab *harness.Tab, role string) {
	t.Helper()
	var last string
	err := harness.Poll(context.Background(), "#role "+role, failoverTimeout, 20*time.Millisecond, func() (bool, error) {
		v, err := harness.Eval[string](tab, `document.getElementById("role").textContent`)
		last = v
		return v == role, err
	})
	require.NoError(t, err, "%v (shows %q)", err, last)
}
