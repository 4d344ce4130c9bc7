//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
	rtserver "github.com/tabfence/tabfence/receiver/realtime"
)

// The realtime connection (tf.connection) across real tabs. Every tab is
// harness.ConnPagePath, driving one connection through window.RT
// (harness.ConnJS) against the demo server's /realtime, with a tap in
// front of that route (harness.RealtimeTap) that sees every upgrade and
// every socket still open, independently of the server's own counters.

// connUser is the demo user the tabs sign in as.
const connUser = "alice"

type connEnv struct {
	*env
	tap *harness.RealtimeTap
}

// setupConn starts the server with the test page and the tap in front, and
// a browser (throttle: see setup).
func setupConn(t *testing.T, k harness.Kind, throttle bool) *connEnv {
	t.Helper()
	tap := harness.NewRealtimeTap("/realtime")
	mw := func(next http.Handler) http.Handler { return harness.ConnPage(tap.Middleware(next)) }
	srv, err := startServer(mw)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	b, err := harness.Start(context.Background(), harness.Options{Browser: k, Throttle: throttle, SharedWindow: throttle})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return &connEnv{env: &env{t: t, b: b, srv: srv}, tap: tap}
}

// connTab opens the test page (faults: with RT.mute) and joins the
// connection with o, as connUser unless o says otherwise.
func (e *connEnv) connTab(o harness.ConnOptions, faults bool) *harness.Tab {
	e.t.Helper()
	if o.User == "" {
		o.User = connUser
	}
	u := e.srv.URL + harness.ConnPagePath
	if faults {
		u += "?faults=1"
	}
	tab, err := e.b.Open(u)
	require.NoError(e.t, err)
	e.t.Cleanup(tab.Close)
	_, err = tab.OpenConn(o)
	require.NoError(e.t, err, "tf.connection(%+v)", o)
	return tab
}

// connTabs opens n tabs of o.
func (e *connEnv) connTabs(n int, o harness.ConnOptions) []*harness.Tab {
	e.t.Helper()
	tabs := make([]*harness.Tab, n)
	for i := range tabs {
		tabs[i] = e.connTab(o, false)
	}
	return tabs
}

// realtimeStatser is the demo server's contract for tests:
// (*server.Local).RealtimeStats returns its /realtime endpoint's Stats.
type realtimeStatser interface{ RealtimeStats() rtserver.Stats }

// stats reads the server's own count of its realtime connections.
func (e *connEnv) stats() rtserver.Stats {
	e.t.Helper()
	s, ok := any(e.srv).(realtimeStatser)
	if !ok {
		e.t.Fatal("server.Local has no RealtimeStats() realtime.Stats, which the demo server's contract promises")
	}
	return s.RealtimeStats()
}

// waitStats waits until the server's counters satisfy cond.
func (e *connEnv) waitStats(what string, cond func(rtserver.Stats) bool) rtserver.Stats {
	e.t.Helper()
	var st rtserver.Stats
	err := harness.Poll(context.Background(), what, failoverTimeout, 25*time.Millisecond, func() (bool, error) {
		st = e.stats()
		return cond(st), nil
	})
	require.NoError(e.t, err, "server stats %+v, tap: %d open, dials %v", st, e.tap.Open(), e.tap.Dials())
	return st
}

// snapshot is what the server holds for connUser.
func (e *connEnv) snapshot() harness.Snapshot {
	e.t.Helper()
	s, err := harness.FetchSnapshot(context.Background(), e.srv.URL, connUser)
	require.NoError(e.t, err)
	return s
}

// snapshotKeys counts each key of the server's "issues" records.
func snapshotKeys(s harness.Snapshot) map[string]int {
	n := map[string]int{}
	for _, c := range s.Changes {
		if c.Store == "issues" && !c.Deleted {
			n[c.Key]++
		}
	}
	return n
}

func connStatus(t *testing.T, tab *harness.Tab) harness.ConnStatus {
	t.Helper()
	s, err := tab.ConnStatus()
	require.NoError(t, err)
	return s
}

// waitConn waits until cond holds for every tab's status at once and
// returns those statuses.
func waitConn(t *testing.T, tabs []*harness.Tab, what string, timeout time.Duration, cond func(i int, s harness.ConnStatus) bool) []harness.ConnStatus {
	t.Helper()
	got := make([]harness.ConnStatus, len(tabs))
	err := harness.Poll(context.Background(), what, timeout, 25*time.Millisecond, func() (bool, error) {
		ok := true
		for i, tab := range tabs {
			s, err := tab.ConnStatus()
			if err != nil {
				return false, err
			}
			got[i] = s
			ok = ok && cond(i, s)
		}
		return ok, nil
	})
	require.NoError(t, err, "statuses: %s", statusLine(got))
	return got
}

// statusLine summarizes statuses for a failure message.
func statusLine(ss []harness.ConnStatus) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		b, _ := json.Marshal(s)
		parts[i] = strconv.Itoa(i) + ": " + string(b)
	}
	return strings.Join(parts, "; ")
}

// leaderIndexes are the tabs whose status says they lead.
func leaderIndexes(ss []harness.ConnStatus) []int {
	var out []int
	for i, s := range ss {
		if s.Leader {
			out = append(out, i)
		}
	}
	return out
}

// waitReady waits until every tab is ready under one leader that every tab
// names, and returns the leader's index.
func waitReady(t *testing.T, tabs []*harness.Tab) int {
	t.Helper()
	var ss []harness.ConnStatus
	err := harness.Poll(context.Background(), "every tab ready under one leader", startTimeout, 25*time.Millisecond, func() (bool, error) {
		ss = ss[:0]
		for _, tab := range tabs {
			s, err := tab.ConnStatus()
			if err != nil {
				return false, err
			}
			ss = append(ss, s)
		}
		l := leaderIndexes(ss)
		if len(l) != 1 {
			return false, nil
		}
		for _, s := range ss {
			if s.State != "ready" || s.LeaderID != ss[l[0]].ID || s.Closed != nil {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "statuses: %s", statusLine(ss))
	return leaderIndexes(ss)[0]
}

// waitAcked waits until the tab's mutation of key is acked and returns it.
func waitAcked(t *testing.T, tab *harness.Tab, key string, timeout time.Duration) harness.MutationResult {
	t.Helper()
	var r harness.MutationResult
	err := harness.Poll(context.Background(), "the ack of "+key, timeout, 25*time.Millisecond, func() (bool, error) {
		var err error
		r, err = tab.MutationOf(key)
		if err == nil && r.State == "rejected" {
			t.Fatalf("mutation %s rejected: %s: %s", key, r.Name, r.Message)
		}
		return r.State == "acked", err
	})
	require.NoError(t, err, "mutation %s: %+v", key, r)
	return r
}

// deltaKeys counts each key over the deltas a tab's onDelta heard.
func deltaKeys(ds []harness.ConnDelta) map[string]int {
	n := map[string]int{}
	for _, d := range ds {
		for _, k := range d.Keys {
			n[k]++
		}
	}
	return n
}

func connDeltas(t *testing.T, tab *harness.Tab) []harness.ConnDelta {
	t.Helper()
	ds, err := tab.ConnDeltas()
	require.NoError(t, err)
	return ds
}

// waitDeltas waits until every tab's onDelta has heard every key.
func waitDeltas(t *testing.T, tabs []*harness.Tab, keys []string, timeout time.Duration) {
	t.Helper()
	var missing []string
	err := harness.Poll(context.Background(), "every tab's onDelta to hear "+strings.Join(keys, ","), timeout, 25*time.Millisecond, func() (bool, error) {
		missing = missing[:0]
		for i, tab := range tabs {
			ds, err := tab.ConnDeltas()
			if err != nil {
				return false, err
			}
			n := deltaKeys(ds)
			for _, k := range keys {
				if n[k] == 0 {
					missing = append(missing, strconv.Itoa(i)+":"+k)
				}
			}
		}
		return len(missing) == 0, nil
	})
	require.NoError(t, err, "not heard (tab:key): %v", missing)
}

// requireInOrder fails unless the deltas' versions rise strictly (no
// duplicate, none out of order) and no key was heard twice.
func requireInOrder(t *testing.T, name string, ds []harness.ConnDelta) {
	t.Helper()
	for i := 1; i < len(ds); i++ {
		require.Greater(t, ds[i].Version, ds[i-1].Version, "%s: delta %d has version %v after %v: %v", name, i, ds[i].Version, ds[i-1].Version, versions(ds))
	}
	for k, n := range deltaKeys(ds) {
		require.Equal(t, 1, n, "%s: key %s heard %d times: %v", name, k, n, versions(ds))
	}
}

func versions(ds []harness.ConnDelta) []float64 {
	v := make([]float64, len(ds))
	for i, d := range ds {
		v[i] = d.Version
	}
	return v
}

// issueTitles are the records read("issues") returns, key -> title, and
// fails on a key returned twice.
func issueTitles(t *testing.T, tab *harness.Tab) map[string]string {
	t.Helper()
	recs, err := tab.ConnIssues()
	require.NoError(t, err)
	out := map[string]string{}
	for _, r := range recs {
		_, dup := out[r.Key]
		require.False(t, dup, "read(\"issues\") returned %s twice", r.Key)
		out[r.Key] = r.Value.Title
	}
	return out
}

// waitIssues waits until every tab's replica holds want (key -> title),
// and nothing else.
func waitIssues(t *testing.T, tabs []*harness.Tab, want map[string]string, timeout time.Duration) {
	t.Helper()
	var last map[string]string
	err := harness.Poll(context.Background(), "every tab's replica to hold the issues", timeout, 50*time.Millisecond, func() (bool, error) {
		for _, tab := range tabs {
			last = issueTitles(t, tab)
			if len(last) != len(want) {
				return false, nil
			}
			for k, v := range want {
				if last[k] != v {
					return false, nil
				}
			}
		}
		return true, nil
	})
	require.NoError(t, err, "want %v, a tab holds %v", want, last)
}

// mutateAll starts one issue.put per tab, keys prefix-<tab>, and returns
// the keys and key -> title.
func mutateAll(t *testing.T, tabs []*harness.Tab, prefix string) ([]string, map[string]string) {
	t.Helper()
	keys := make([]string, len(tabs))
	titles := map[string]string{}
	for i, tab := range tabs {
		keys[i] = prefix + "-" + strconv.Itoa(i)
		titles[keys[i]] = "title of " + keys[i]
		require.NoError(t, tab.Mutate(keys[i], titles[keys[i]]))
	}
	return keys, titles
}

// without returns tabs minus the one at i.
func without(tabs []*harness.Tab, i int) []*harness.Tab {
	return slices.Delete(slices.Clone(tabs), i, i+1)
}
