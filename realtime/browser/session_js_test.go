//go:build js && wasm

package browser_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall/js"
	"testing"
	"time"

	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/realtime/browser"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// A signed-out leader (401) waits, unauthorized, in every tab; it dials
// again when a tab asks (Retry, as after a new sign-in), and then connects.
func TestConnUnauthorizedRetriesWhenAsked(t *testing.T) {
	f := newFixture(t)
	var signedIn atomic.Bool
	cfg := f.config()
	good := "ws" + strings.TrimPrefix(f.base, "http") + "/rt?user=" + f.user
	cfg.URL = func(context.Context) (string, error) {
		if signedIn.Load() {
			return good, nil
		}
		return "ws" + strings.TrimPrefix(f.base, "http") + "/rt", nil
	}
	var conns []*browser.Conn
	for i := 0; i < 2; i++ {
		c, err := browser.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		conns = append(conns, c)
	}
	waitFor(t, "unauthorized in every tab", func() bool {
		l, _ := leaderOf(conns)
		return l != nil && conns[0].Status().State == browser.StateUnauthorized &&
			conns[1].Status().State == browser.StateUnauthorized
	})
	_, fs := leaderOf(conns)
	if s := fs[0].Status(); !strings.Contains(s.LastError, "401") {
		t.Fatalf("last error %q", s.LastError)
	}
	signedIn.Store(true)
	fs[0].Retry()
	waitFor(t, "ready after the retry", func() bool { return allReady(conns) })
}

// A newer build upgrading the database closes this build's connection as
// upgraded (not deleted: the event has a target version).
func TestConnUpgradedByNewerBuild(t *testing.T) {
	f := newFixture(t)
	conns := f.open(1)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	name := conns[0].Names().Database
	fn := js.Global().Get("Function").New("name", `return new Promise((res, rej) => {
		const r = indexedDB.open(name, 2);
		r.onsuccess = () => { r.result.close(); res(); };
		r.onerror = () => rej(r.error);
	})`)
	if _, err := jsglue.Await(context.Background(), fn.Invoke(name)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "closed as upgraded", func() bool {
		s := conns[0].Status()
		return s.Closed == browser.ClosedUpgraded && s.State == browser.StateClosed
	})
}

// With a FencePath the leader's mutations carry its server token: once a
// later leader was issued a newer one, the deposed leader's mutation is
// refused as stale instead of applied.
func TestConnFencedMutations(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	cfg.FencePath = f.base + "/u/" + f.user + "/fence/"
	c, err := browser.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	conns := []*browser.Conn{c}
	waitFor(t, "ready", func() bool { return allReady(conns) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Mutate(ctx, browser.Mutation{Op: "put", Payload: []byte(`{"id":"a"}`)}); err != nil {
		t.Fatal(err)
	}
	// A newer leader of this browser took a token for its resource and
	// wrote with it.
	res, err := c.ServerResource(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.fenceAndWrite(ctx, cfg.FencePath, res)
	_, err = c.Mutate(ctx, browser.Mutation{Op: "put", Payload: []byte(`{"id":"b"}`)})
	var rej *browser.RejectError
	if !errors.As(err, &rej) {
		t.Fatalf("a deposed leader's mutation: %v", err)
	}
	if n, _, _ := f.counts(); n != 1 {
		t.Fatalf("server applied %d", n)
	}
}

// A leader whose token was superseded (as a frozen leader's is when a
// follower steals) finds its replica write Stale: it writes and announces
// nothing, steps down, and the next term (here its own again, with a new
// token) delivers the delta once.
func TestConnStaleLeaderStepsDown(t *testing.T) {
	f := newFixture(t)
	conns := f.open(2)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	l, fs := leaderOf(conns)
	old := l.Status().Token
	var mu sync.Mutex
	var got []uint64
	fs[0].OnDelta(func(d rt.Delta) { mu.Lock(); got = append(got, d.Version); mu.Unlock() })
	names := l.Names()
	db, err := idb.Open(context.Background(), names.Database, idb.WithOwnStores(browser.StoreMeta, browser.StorePending),
		idb.WithSchema(idb.Schema{Steps: []idb.Step{{Version: 1}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	thief, err := db.AllocateToken(context.Background(), names.Resource, "thief")
	if err != nil || thief <= old {
		t.Fatalf("allocated %d (leader %d): %v", thief, old, err)
	}
	f.ctl("POST", "/ctl/publish", item("s1"))
	waitFor(t, "a new term past the thief's token, at v1 in every tab", func() bool {
		s := conns[0].Status()
		lead, _ := leaderOf(conns)
		return lead != nil && lead.Status().Token > thief && s.Version == 1 && conns[1].Status().Version == 1
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != 1 {
		t.Fatalf("follower got %v", got)
	}
}

// A replica ahead of the server (the server lost its history) is reset:
// the leader replaces it with the snapshot, under its token, and every tab
// holds the snapshot's records only.
func TestConnResetFromSnapshot(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	cfg.Snapshot = f.base + "/ctl/snapshot"
	names, _ := cfg.Names()
	db, err := idb.Open(context.Background(), names.Database, idb.WithOwnStores(browser.StoreMeta, browser.StorePending),
		idb.WithSchema(idb.Schema{Steps: []idb.Step{{Version: 1, Upgrade: func(tx *idb.UpgradeTx) error {
			return tx.CreateStore("items", idb.StoreOptions{})
		}}}}))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := db.AllocateToken(context.Background(), names.Resource, "seed")
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Apply(context.Background(), idb.Op{Resource: names.Resource, Token: tok, OperationID: "seed"}, func(tx *idb.WriteTx) error {
		if err := tx.Put("items", js.ValueOf("old"), js.ValueOf(1)); err != nil {
			return err
		}
		return tx.Put(browser.StoreMeta, js.ValueOf("version"), js.ValueOf(50))
	}, "items", browser.StoreMeta)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	c, err := browser.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	waitFor(t, "ready at the server's version", func() bool {
		s := c.Status()
		return s.State == browser.StateReady && s.Version == 0
	})
	recs, err := c.Read(context.Background(), "items")
	if err != nil || len(recs) != 1 || recs[0].Key != "snap" {
		t.Fatalf("replica after reset: %v %v", recs, err)
	}
}

// fenceAndWrite is another leader taking the next server token for
// resource and writing with it.
func (f *fixture) fenceAndWrite(ctx context.Context, fencePath, resource string) {
	f.t.Helper()
	opts := js.Global().Get("Object").New()
	opts.Set("method", "POST")
	seg := js.Global().Call("encodeURIComponent", resource).String()
	p, _ := jsglue.Call(js.Global(), "fetch", fencePath+seg, opts)
	resp, err := jsglue.Await(ctx, p)
	if err != nil || resp.Get("status").Int() != 200 {
		f.t.Fatalf("fence: %v", err)
	}
	jp, _ := jsglue.Call(resp, "json")
	body, err := jsglue.Await(ctx, jp)
	if err != nil {
		f.t.Fatal(err)
	}
	tok := strconv.Itoa(body.Get("token").Int())
	if st := f.ctl("POST", "/ctl/fenced?resource="+js.Global().Call("encodeURIComponent", resource).String()+"&token="+tok, ""); st != "201" {
		f.t.Fatalf("the other leader's write: %s", st)
	}
}

// Another browser of the same user (a phone) leading its own connection
// does not depose this browser's leader at the server: the fence is per
// browser. A scope with characters a URL path and the receiver's resource
// rule refuse is fenced too.
func TestConnFenceIsPerBrowser(t *testing.T) {
	f := newFixture(t)
	for _, scope := range []string{f.scope, f.scope + " #?"} {
		cfg := f.config()
		cfg.Scope = scope
		cfg.FencePath = f.base + "/u/" + f.user + "/fence/"
		c, err := browser.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		waitFor(t, "ready", func() bool { return allReady([]*browser.Conn{c}) })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Mutate(ctx, browser.Mutation{Op: "put", Payload: []byte(`{"id":"a"}`)}); err != nil {
			t.Fatalf("%q: %v", scope, err)
		}
		phone, err := browser.ServerResource(scope, 1, "phone")
		if err != nil {
			t.Fatal(err)
		}
		f.fenceAndWrite(ctx, cfg.FencePath, phone)
		if scope == f.scope { // a phone of the build where every browser fenced the lock's name
			f.fenceAndWrite(ctx, cfg.FencePath, c.Names().Resource)
		}
		if _, err := c.Mutate(ctx, browser.Mutation{Op: "put", Payload: []byte(`{"id":"b"}`)}); err != nil {
			t.Fatalf("%q: a phone's leader deposed this browser's: %v", scope, err)
		}
	}
}
