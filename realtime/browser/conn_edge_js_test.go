//go:build js && wasm

package browser_test

import (
	"context"
	"errors"
	"strings"
	"syscall/js"
	"testing"
	"time"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/realtime/browser"
)

// The connection's edges: a server of another protocol, the offline
// switch seen by every tab, a missed rt.settled, a page frozen mid-mutate.

// A server of another protocol closes with 4426: every tab shows
// "outdated", and the leader does not redial by itself (a retry cannot
// change the server's protocol), even with a backoff of a few ms.
func TestConnOutdated(t *testing.T) {
	f := newFixture(t)
	cfg := f.config()
	ws := "ws" + strings.TrimPrefix(f.base, "http") + "/rt-old?user=" + f.user
	cfg.URL = func(context.Context) (string, error) { return ws, nil }
	cfg.Leader.Backoff = &outbox.Backoff{Base: 5 * time.Millisecond, Cap: 10 * time.Millisecond}
	var conns []*browser.Conn
	for i := 0; i < 2; i++ {
		c, err := browser.Open(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		conns = append(conns, c)
	}
	waitFor(t, "outdated in every tab", func() bool {
		for _, c := range conns {
			if c.Status().State != browser.StateOutdated {
				return false
			}
		}
		return true
	})
	// A redialing leader would have dialed ~100 times in this window.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if n := f.oldUpgrades(); n != 1 {
			t.Fatalf("%d upgrades at the outdated server, want 1 (no redial)", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// oldUpgrades counts this user's dials at the server of another protocol.
func (f *fixture) oldUpgrades() int {
	user := f.user
	f.user = "old-" + user
	defer func() { f.user = user }()
	_, up, _ := f.counts()
	return up
}

// The offline switch is the browser's: flipped in one tab, every tab's
// status says so (a UI's checkbox follows it), and a tab opened while it
// is on reads it from the database.
func TestConnOfflineShownEverywhere(t *testing.T) {
	f := newFixture(t)
	conns := f.open(2)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	_, fs := leaderOf(conns)
	if err := fs[0].SetOffline(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the switch on in every tab", func() bool { return conns[0].Status().Offline && conns[1].Status().Offline })
	late := f.open(1)[0]
	if !late.Status().Offline {
		t.Fatalf("a tab opened while offline: %+v", late.Status())
	}
	if err := late.SetOffline(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the switch off in every tab", func() bool {
		return !conns[0].Status().Offline && !conns[1].Status().Offline && !late.Status().Offline
	})
}

// A follower that missed a leader's rt.settled (here: the pending record
// is deleted as the leader's fenced settle does, and nothing is
// announced) drops the entry at its next reload (a version gap), and its
// waiting Mutate ends with ErrOutcomeMissed instead of waiting forever.
func TestConnMissedSettledReloads(t *testing.T) {
	f := newFixture(t)
	conns := f.open(2)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	l, fs := leaderOf(conns)
	if err := l.SetOffline(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "offline in every tab", func() bool { return fs[0].Status().State == browser.StateOffline })
	done := make(chan error, 1)
	go func() {
		_, err := fs[0].Mutate(context.Background(), browser.Mutation{ID: "lost-1", Op: "put", Payload: []byte(`{"id":"l1"}`)})
		done <- err
	}()
	waitFor(t, "listed in every tab", func() bool { return l.Status().Pending == 1 && fs[0].Status().Pending == 1 })
	deletePending(t, l.Names().Database, "lost-1")

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
	waitFor(t, "the follower drops what the store no longer holds", func() bool { return fs[0].Status().Pending == 0 })
	select {
	case err := <-done:
		if !errors.Is(err, browser.ErrOutcomeMissed) {
			t.Fatalf("mutate: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the mutation's caller still waits")
	}
}

// deletePending deletes id from the connection's pending store with a
// connection of its own, as a leader's settle does.
func deletePending(t *testing.T, database, id string) {
	t.Helper()
	ctx := context.Background()
	db, err := raw.OpenDatabase(ctx, database, 0, raw.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Call("close")
	tx, err := raw.Begin(db, []string{browser.StorePending}, raw.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Store(browser.StorePending).Delete(js.ValueOf(id)).Err(); err != nil {
		t.Fatal(err)
	}
	_ = tx.Commit()
	if err := tx.Await(ctx); err != nil {
		t.Fatal(err)
	}
}

// A page frozen mid-mutate: the pending store's transaction is aborted
// (the freeze tracker aborts every transaction opened while frozen). The
// write is tried again once the page resumes, and the mutation goes
// through; a caller that gives up before the resume gets ErrNotStored and
// nothing is pending.
func TestConnFrozenMutate(t *testing.T) {
	f := newFixture(t)
	conns := f.open(1)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	c := conns[0]
	lifecycle := func(kind string) {
		js.Global().Get("document").Call("dispatchEvent", js.Global().Get("Event").New(kind))
	}
	t.Cleanup(func() { lifecycle("resume") })
	lifecycle("freeze")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Mutate(ctx, browser.Mutation{ID: "frozen-1", Op: "put", Payload: []byte(`{"id":"z1"}`)})
	if !errors.Is(err, browser.ErrNotStored) {
		t.Fatalf("mutate while frozen: %v", err)
	}
	if p, _ := c.Pending(context.Background()); len(p) != 0 {
		t.Fatalf("a mutation not stored is listed: %v", p)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Mutate(context.Background(), browser.Mutation{ID: "frozen-2", Op: "put", Payload: []byte(`{"id":"z2"}`)})
		done <- err
	}()
	lifecycle("resume")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("mutate across the resume: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the mutation made while frozen never settled")
	}
	if n, _, _ := f.counts(); n != 1 {
		t.Fatalf("server applied %d, want 1 (frozen-2)", n)
	}
}
