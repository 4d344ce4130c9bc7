//go:build js && wasm

package browser_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall/js"
	"testing"
	"time"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/realtime/browser"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// The server is started by the native TestConnInChromium, which runs these
// tests in Chromium with TABFENCE_TEST_SERVER set. Several Conns in one
// page contend for the lock exactly like tabs.
func testServer(t *testing.T) string {
	u := os.Getenv("TABFENCE_TEST_SERVER")
	if u == "" {
		t.Skip("TABFENCE_TEST_SERVER not set: run the native TestConnInChromium (go test ./realtime/browser/)")
	}
	return u
}

var runID = strconv.FormatInt(time.Now().UnixNano()%1e9, 36)

// fixture is one test's scope and user, and its tabs.
type fixture struct {
	t     *testing.T
	base  string
	scope string
	user  string
	conns []*browser.Conn
}

func newFixture(t *testing.T) *fixture {
	name := strings.ToLower(strings.TrimPrefix(t.Name(), "TestConn")) + runID
	return &fixture{t: t, base: testServer(t), scope: name, user: name}
}

func (f *fixture) config() browser.Config {
	ws := "ws" + strings.TrimPrefix(f.base, "http") + "/rt?user=" + f.user
	return browser.Config{Scope: f.scope, URL: func(context.Context) (string, error) { return ws, nil }, Stores: []string{"items"}}
}

func (f *fixture) open(n int) []*browser.Conn {
	f.t.Helper()
	var out []*browser.Conn
	for i := 0; i < n; i++ {
		c, err := browser.Open(context.Background(), f.config())
		if err != nil {
			f.t.Fatalf("open: %v", err)
		}
		f.t.Cleanup(func() { _ = c.Close(context.Background()) })
		out = append(out, c)
		f.conns = append(f.conns, c)
	}
	return out
}

// waitFor polls cond (a condition, never a fixed sleep) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func leaderOf(conns []*browser.Conn) (*browser.Conn, []*browser.Conn) {
	var l *browser.Conn
	var rest []*browser.Conn
	for _, c := range conns {
		if c.Status().Leader && l == nil {
			l = c
		} else {
			rest = append(rest, c)
		}
	}
	return l, rest
}

func allReady(conns []*browser.Conn) bool {
	for _, c := range conns {
		if c.Status().State != browser.StateReady {
			return false
		}
	}
	l, _ := leaderOf(conns)
	return l != nil
}

// get fetches a control URL of the test server and returns its body.
func (f *fixture) ctl(method, path, body string) string {
	f.t.Helper()
	opts := js.Global().Get("Object").New()
	opts.Set("method", method)
	if body != "" {
		opts.Set("body", body)
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	p, err := jsglue.Call(js.Global(), "fetch", f.base+path+sep+"user="+f.user, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	resp, err := jsglue.Await(context.Background(), p)
	if err != nil {
		f.t.Fatal(err)
	}
	tp, _ := jsglue.Call(resp, "text")
	txt, err := jsglue.Await(context.Background(), tp)
	if err != nil {
		f.t.Fatal(err)
	}
	if st := resp.Get("status").Int(); st != 200 {
		f.t.Fatalf("%s %s: %d %s", method, path, st, txt.String())
	}
	return txt.String()
}

// counts are the server's mutations applied and upgrades for this user,
// and the endpoint's open connections.
func (f *fixture) counts() (applied, upgrades, open int) {
	parts := strings.Fields(f.ctl("GET", "/ctl/count", ""))
	applied, _ = strconv.Atoi(parts[0])
	upgrades, _ = strconv.Atoi(parts[1])
	open, _ = strconv.Atoi(parts[2])
	return
}

func item(id string) string {
	return `[{"store":"items","key":"` + id + `","value":{"id":"` + id + `"}}]`
}

// Three tabs, one socket: only the leader dials, and every tab shows the
// leader's ready state.
func TestConnOneSocket(t *testing.T) {
	f := newFixture(t)
	conns := f.open(3)
	waitFor(t, "a ready leader seen by every tab", func() bool { return allReady(conns) })
	// Give followers time to (wrongly) dial: deltas flowing prove the
	// connection is live meanwhile.
	for i := 0; i < 3; i++ {
		f.ctl("POST", "/ctl/publish", item("x"+strconv.Itoa(i)))
	}
	waitFor(t, "every tab at version 3", func() bool {
		for _, c := range conns {
			if c.Status().Version != 3 {
				return false
			}
		}
		return true
	})
	if _, up, _ := f.counts(); up != 1 {
		t.Fatalf("%d upgrades for 3 tabs, want 1", up)
	}
	l, _ := leaderOf(conns)
	for _, c := range conns {
		if s := c.Status(); s.LeaderID != l.Status().ID || s.Token != l.Status().Token || s.Token == 0 {
			t.Fatalf("tab status %+v, leader %+v", s, l.Status())
		}
	}
}

// A delta reaches every tab once, in order, and a follower that reads the
// replica when it hears the announcement finds the delta written.
func TestConnDeltaEveryTabOnce(t *testing.T) {
	f := newFixture(t)
	conns := f.open(3)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	var mu sync.Mutex
	got := make([][]uint64, len(conns))
	var missing []string
	for i, c := range conns {
		i, c := i, c
		c.OnDelta(func(d rt.Delta) {
			recs, err := c.Read(context.Background(), "items")
			found := false
			for _, r := range recs {
				found = found || strings.Contains(string(d.Changes), `"key":"`+r.Key+`"`)
			}
			mu.Lock()
			got[i] = append(got[i], d.Version)
			if err != nil || !found {
				missing = append(missing, "tab "+strconv.Itoa(i)+" v"+strconv.FormatUint(d.Version, 10))
			}
			mu.Unlock()
		})
	}
	for i := 1; i <= 5; i++ {
		f.ctl("POST", "/ctl/publish", item("d"+strconv.Itoa(i)))
	}
	waitFor(t, "5 deltas in every tab", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range got {
			if len(g) < 5 {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for i, g := range got {
		if len(g) != 5 || g[0] != 1 || g[4] != 5 {
			t.Fatalf("tab %d got versions %v", i, g)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("announced before the replica held it: %v", missing)
	}
}

// A follower's mutation is sent by the leader and resolves on the ack in
// the follower; every tab lists it meanwhile and hears its delta.
func TestConnMutateFromFollower(t *testing.T) {
	f := newFixture(t)
	conns := f.open(2)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	_, fs := leaderOf(conns)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := fs[0].Mutate(ctx, browser.Mutation{Op: "put", Payload: []byte(`{"id":"m1"}`)})
	if err != nil || ack.Status != 201 || ack.Replayed {
		t.Fatalf("ack %+v, %v", ack, err)
	}
	waitFor(t, "the delta in every tab", func() bool {
		return conns[0].Status().Version == 1 && conns[1].Status().Version == 1
	})
	if n, _, _ := f.counts(); n != 1 {
		t.Fatalf("server applied %d", n)
	}
	for _, c := range conns {
		if p, _ := c.Pending(context.Background()); len(p) != 0 {
			t.Fatalf("still pending: %v", p)
		}
	}
	_, err = fs[0].Mutate(ctx, browser.Mutation{Op: "put", Payload: []byte(`{}`)})
	var rej *browser.RejectError
	if !errors.As(err, &rej) || !errors.Is(err, browser.ErrRejected) || rej.Problem.Status != 422 {
		t.Fatalf("reject: %v", err)
	}
}

// The reference's ugly case: offline, a follower mutates; the leader has it
// but closes before it can send; the follower leads, and once back online
// resends; its own promise resolves and the server applied it once.
func TestConnFailoverResends(t *testing.T) {
	f := newFixture(t)
	conns := f.open(2)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	l, fs := leaderOf(conns)
	b := fs[0]
	if err := b.SetOffline(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "offline in every tab", func() bool {
		return l.Status().State == browser.StateOffline && b.Status().State == browser.StateOffline
	})
	done := make(chan error, 1)
	go func() {
		_, err := b.Mutate(context.Background(), browser.Mutation{ID: "fail-1", Op: "put", Payload: []byte(`{"id":"f1"}`)})
		done <- err
	}()
	waitFor(t, "the leader lists the follower's mutation", func() bool { return l.Status().Pending == 1 })
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the follower leads", func() bool { return b.Status().Leader })
	if s := b.Status(); s.State != browser.StateOffline {
		t.Fatalf("the new leader forgot the offline switch: %+v", s)
	}
	if err := b.SetOffline(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the follower's mutation never settled")
	}
	if n, _, _ := f.counts(); n != 1 {
		t.Fatalf("server applied %d", n)
	}
}

// A follower that sees a version gap reloads from IndexedDB (which holds
// what the leader wrote) instead of applying on top of a hole.
func TestConnGapReloads(t *testing.T) {
	f := newFixture(t)
	conns := f.open(2)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	l, fs := leaderOf(conns)
	f.ctl("POST", "/ctl/publish", item("g1"))
	waitFor(t, "v1", func() bool { return fs[0].Status().Version == 1 })
	reloaded := make(chan uint64, 4)
	fs[0].OnReload(func(v uint64) { reloaded <- v })
	var deltas []uint64
	var mu sync.Mutex
	fs[0].OnDelta(func(d rt.Delta) { mu.Lock(); deltas = append(deltas, d.Version); mu.Unlock() })
	// A leader's announcement of v3 after v1 (v2 missed): a newer token on
	// the leaders' resource, as a next leader's would be.
	ch, err := channel.Open(l.Names().Lock)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	seq := channel.NewSequencer(l.Names().Resource, "other", l.Status().Token+1)
	p := js.Global().Get("Object").New()
	p.Set("version", 3)
	p.Set("prev", 2)
	p.Set("changes", "[]")
	if _, err := ch.Send(seq, "rt.delta", p); err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-reloaded:
		if v != 1 {
			t.Fatalf("reloaded at %d, want the stored 1", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no reload on a gap")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(deltas) != 0 {
		t.Fatalf("applied across the gap: %v", deltas)
	}
}

// Signing out in one tab deletes the database: every tab's connection
// closes as deleted, and the leader lets go of the lock.
func TestConnSignOutDeletes(t *testing.T) {
	f := newFixture(t)
	conns := f.open(2)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	_, fs := leaderOf(conns)
	if err := fs[0].SignOut(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every tab closed as deleted", func() bool {
		for _, c := range conns {
			if c.Status().Closed != browser.ClosedDeleted || c.Status().State != browser.StateClosed {
				return false
			}
		}
		return true
	})
	name := conns[0].Names().Lock
	waitFor(t, "the lock released", func() bool {
		s, err := locks.Query(context.Background())
		if err != nil {
			return false
		}
		for _, h := range s.Held {
			if h.Name == name {
				return false
			}
		}
		return true
	})
	waitFor(t, "the socket closed", func() bool { _, _, open := f.counts(); return open == 0 })
}

// A delta whose changes are malformed is counted and written as an empty
// step (no panic, no gap); hostile channel messages are counted and dropped.
func TestConnBadInputCounted(t *testing.T) {
	f := newFixture(t)
	conns := f.open(2)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	l, fs := leaderOf(conns)
	f.ctl("POST", "/ctl/publish", `[{"store":"tf_rt_meta","key":"version","value":99}]`)
	f.ctl("POST", "/ctl/publish", item("ok"))
	waitFor(t, "v2 in every tab", func() bool { return l.Status().Version == 2 && fs[0].Status().Version == 2 })
	if n := l.Stats().BadChanges; n != 1 {
		t.Fatalf("bad changes counted %d", n)
	}
	recs, err := fs[0].Read(context.Background(), "items")
	if err != nil || len(recs) != 1 || recs[0].Key != "ok" {
		t.Fatalf("items %v %v", recs, err)
	}
	ch, err := channel.Open(l.Names().Lock)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	seq := channel.NewSequencer("somebody", "x", 1)
	for _, kind := range []string{"rt.mutation", "rt.settled", "rt.offline", "rt.nonsense"} {
		p := js.Global().Get("Object").New()
		p.Set("id", 7)
		p.Set("offline", "yes")
		if _, err := ch.Send(seq, kind, p); err != nil {
			t.Fatal(err)
		}
	}
	// A delta on another resource than the leaders' is not the leader's.
	p := js.Global().Get("Object").New()
	p.Set("version", 3)
	p.Set("prev", 2)
	p.Set("changes", item("evil"))
	_, _ = ch.Send(seq, "rt.delta", p)
	waitFor(t, "hostile messages counted", func() bool { return fs[0].Stats().BadMessages >= 5 && l.Stats().BadMessages >= 5 })
	if s := fs[0].Status(); s.Version != 2 || s.Pending != 0 || s.State != browser.StateReady {
		t.Fatalf("hostile messages changed the status: %+v", s)
	}
}
