//go:build js && wasm

package browser_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"syscall/js"
	"testing"

	"github.com/tabfence/tabfence/realtime/browser"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// countReplicaCommits counts the commits of transactions over the replica
// store from now on (the real IndexedDB's, counted on the way in); stop
// restores the prototype.
func countReplicaCommits(store string) (count func() int, stop func()) {
	proto := js.Global().Get("IDBTransaction").Get("prototype")
	orig := proto.Get("commit")
	n := 0
	wrap := js.FuncOf(func(this js.Value, args []js.Value) any {
		if this.Get("mode").String() == "readwrite" && this.Get("objectStoreNames").Call("contains", store).Bool() {
			n++
		}
		return orig.Call("call", this)
	})
	proto.Set("commit", wrap)
	var once sync.Once
	return func() int { return n }, func() { once.Do(func() { proto.Set("commit", orig); wrap.Release() }) }
}

// Deltas the server sends in a burst (the catch-up after the connection
// was switched off) reach every tab once and in order, the replica holds
// every record and the last version, each announcement finds its record
// written, and the leader writes them in fewer transactions than deltas
// (deltas that queued while one was written share the next).
func TestConnBurstOfDeltasBatched(t *testing.T) {
	f := newFixture(t)
	conns := f.open(2)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	l, fs := leaderOf(conns)
	ctx := context.Background()
	if err := l.SetOffline(ctx, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "offline", func() bool { return l.Status().State == browser.StateOffline })
	const n = 30
	for i := 1; i <= n; i++ {
		f.ctl("POST", "/ctl/publish", item("b"+strconv.Itoa(i)))
	}
	var mu sync.Mutex
	got := map[int][]uint64{}
	var missing []string
	for i, c := range conns {
		c.OnDelta(func(d rt.Delta) {
			recs, err := c.Read(ctx, "items")
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
	commits, stop := countReplicaCommits("items")
	defer stop()
	if err := l.SetOffline(ctx, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every delta in every tab", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got[0]) >= n && len(got[1]) >= n
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	for i := range conns {
		for j, v := range got[i] {
			if v != uint64(j+1) || len(got[i]) != n {
				t.Fatalf("tab %d got versions %v", i, got[i])
			}
		}
	}
	if len(missing) > 0 {
		t.Fatalf("announced before the replica held it: %v", missing)
	}
	if recs, err := fs[0].Read(ctx, "items"); err != nil || len(recs) != n {
		t.Fatalf("replica holds %d records (%v)", len(recs), err)
	}
	if s := fs[0].Status(); s.Version != n {
		t.Fatalf("follower at version %d", s.Version)
	}
	if c := commits(); c >= n || c == 0 {
		t.Fatalf("%d replica transactions for %d deltas", c, n)
	}
	t.Logf("%d deltas in %d replica transactions", n, commits())
}

// Mutations made while the connection was off are resent on ready; their
// acks (interleaved with the deltas they made) settle every promise, empty
// the pending store in every tab, and are written in fewer transactions
// than acks; the server applied each once.
func TestConnBurstOfAcksBatched(t *testing.T) {
	f := newFixture(t)
	conns := f.open(2)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	l, fs := leaderOf(conns)
	ctx := context.Background()
	if err := l.SetOffline(ctx, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "offline", func() bool { return fs[0].Status().State == browser.StateOffline })
	const n = 30
	errs := make(chan error, n)
	for i := 1; i <= n; i++ {
		id := "a" + strconv.Itoa(i)
		go func() {
			_, err := fs[0].Mutate(ctx, browser.Mutation{ID: id, Op: "put", Payload: []byte(`{"id":"` + id + `"}`)})
			errs <- err
		}()
	}
	waitFor(t, "the leader lists every mutation", func() bool { return l.Status().Pending == n })
	commits, stop := countReplicaCommits("tf_rt_pending")
	defer stop()
	if err := l.SetOffline(ctx, false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "nothing pending in any tab", func() bool {
		for _, c := range conns {
			if p, err := c.Pending(ctx); err != nil || len(p) != 0 || c.Status().Pending != 0 {
				return false
			}
		}
		return true
	})
	stop()
	if applied, _, _ := f.counts(); applied != n {
		t.Fatalf("server applied %d of %d", applied, n)
	}
	waitFor(t, "every delta in the follower", func() bool { return fs[0].Status().Version == n })
	if c := commits(); c >= n || c == 0 {
		t.Fatalf("%d pending-store transactions for %d acks", c, n)
	}
	t.Logf("%d acks in %d pending-store transactions", n, commits())
}
