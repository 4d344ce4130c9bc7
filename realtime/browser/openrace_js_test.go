//go:build js && wasm

package browser_test

import (
	"context"
	"errors"
	"syscall/js"
	"testing"
	"time"

	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/realtime/browser"
)

// The database deleted while Open waits: Open fails with ErrClosed and
// leaves no election running (before, it returned a connection whose
// Close waited for ever).
func TestConnOpenRacingADelete(t *testing.T) {
	f := newFixture(t)
	a := f.open(1)[0]
	name := a.Names().Database
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Another connection at version 1 that does not close when asked: a
	// newer schema's open (B's) waits for it, and it sees B ask.
	hold := js.Global().Call("eval", `(name) => new Promise((res, rej) => {
		const r = indexedDB.open(name);
		r.onerror = () => rej(r.error);
		r.onsuccess = () => {
			const db = r.result;
			window.__asked = false;
			db.onversionchange = () => { window.__asked = true; };
			res(() => db.close());
		};
	})`)
	release, err := jsglue.Await(context.Background(), hold.Invoke(name))
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config()
	cfg.SchemaVersion = 2
	type opened struct {
		c   *browser.Conn
		err error
	}
	got := make(chan opened, 1)
	go func() {
		c, err := browser.Open(context.Background(), cfg)
		got <- opened{c, err}
	}()
	waitFor(t, "B's open waiting", func() bool { return js.Global().Get("__asked").Truthy() })
	deleted := make(chan error, 1)
	go func() { deleted <- idb.Delete(context.Background(), name, nil) }() // queued behind B's open
	release.Invoke()
	var o opened
	select {
	case o = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("Open hangs")
	}
	if o.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		t.Fatalf("Open succeeded on a deleted database (state %s; Close: %v)", o.c.Status().State, o.c.Close(ctx))
	}
	if !errors.Is(o.err, browser.ErrClosed) {
		t.Fatalf("Open: %v", o.err)
	}
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the delete never completed: a connection stayed open")
	}
}
