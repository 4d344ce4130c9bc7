//go:build js && wasm

package browser_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tabfence/tabfence/realtime/browser"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// openSwitchable opens n tabs whose URL names the fixture's user at dial
// time, so a test can point the browser at a server stream that is behind
// its replica (as after a server restart or a restored database).
func (f *fixture) openSwitchable(n int, snapshot string) ([]*browser.Conn, func(user string)) {
	var mu sync.Mutex
	user := f.user
	cfg := f.config()
	cfg.Snapshot = snapshot
	cfg.URL = func(context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		return "ws" + strings.TrimPrefix(f.base, "http") + "/rt?user=" + user, nil
	}
	var out []*browser.Conn
	for i := 0; i < n; i++ {
		c, err := browser.Open(context.Background(), cfg)
		if err != nil {
			f.t.Fatalf("open: %v", err)
		}
		f.t.Cleanup(func() { _ = c.Close(context.Background()) })
		out = append(out, c)
	}
	return out, func(u string) {
		mu.Lock()
		user = u
		mu.Unlock()
		f.user = u // the control API too
	}
}

func keys(t *testing.T, c *browser.Conn) []string {
	t.Helper()
	recs, err := c.Read(context.Background(), "items")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Key)
	}
	return out
}

// After the server resets the stream to a lower version (the replica was
// at 3, the server is at 0), the new leader empties the replica, every tab
// goes down to version 0 with it, and the deltas v1..v3 that follow are
// written and applied everywhere, not skipped as already seen.
func TestConnResetToLowerVersion(t *testing.T) {
	f := newFixture(t)
	conns, switchUser := f.openSwitchable(3, "")
	waitFor(t, "ready", func() bool { return allReady(conns) })
	for i := 1; i <= 3; i++ {
		f.ctl("POST", "/ctl/publish", item("o"+strconv.Itoa(i)))
	}
	at := func(cs []*browser.Conn, v uint64) func() bool {
		return func() bool {
			for _, c := range cs {
				if c.Status().Version != v {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, "every tab at v3", at(conns, 3))

	switchUser(f.user + "z") // a stream at version 0
	old, rest := leaderOf(conns)
	var mu sync.Mutex
	got := map[*browser.Conn][]uint64{}
	for _, c := range rest {
		c.OnDelta(func(d rt.Delta) {
			mu.Lock()
			got[c] = append(got[c], d.Version)
			mu.Unlock()
		})
	}
	_ = old.Close(context.Background())
	waitFor(t, "a new leader, ready", func() bool { return allReady(rest) })
	waitFor(t, "every tab back at v0 after the reset", at(rest, 0))

	for i := 1; i <= 3; i++ {
		f.ctl("POST", "/ctl/publish", item("n"+strconv.Itoa(i)))
	}
	waitFor(t, "every tab at v3 again", at(rest, 3))
	mu.Lock()
	defer mu.Unlock()
	for _, c := range rest {
		if g := got[c]; len(g) != 3 || g[0] != 1 || g[2] != 3 {
			t.Errorf("tab (leader %v) applied versions %v, want 1..3", c.Status().Leader, g)
		}
		if k := strings.Join(keys(t, c), ","); k != "n1,n2,n3" {
			t.Errorf("replica holds %q, want n1,n2,n3", k)
		}
	}
}

// A reset whose snapshot cannot be fetched (here a 507) leaves the replica
// as it was, in every tab: the leader does not count itself at the
// server's version, announces nothing, and asks again after a backoff.
func TestConnFailedSnapshotKeepsReplica(t *testing.T) {
	f := newFixture(t)
	conns, switchUser := f.openSwitchable(3, f.base+"/ctl/badsnapshot")
	waitFor(t, "ready", func() bool { return allReady(conns) })
	for i := 1; i <= 3; i++ {
		f.ctl("POST", "/ctl/publish", item("o"+strconv.Itoa(i)))
	}
	waitFor(t, "every tab at v3", func() bool {
		for _, c := range conns {
			if c.Status().Version != 3 {
				return false
			}
		}
		return true
	})
	switchUser(f.user + "z") // a stream at version 0: the server says reset
	old, rest := leaderOf(conns)
	_ = old.Close(context.Background())
	waitFor(t, "the new leader asking again after the failed reset", func() bool {
		_, upgrades, _ := f.counts()
		return upgrades >= 3
	})
	for _, c := range rest {
		st := c.Status()
		if st.Version != 3 || st.State == browser.StateReady {
			t.Errorf("tab (leader %v) at v%d, %s: want v3, not ready", st.Leader, st.Version, st.State)
		}
		if k := strings.Join(keys(t, c), ","); k != "o1,o2,o3" {
			t.Errorf("replica holds %q, want o1,o2,o3", k)
		}
	}
}
