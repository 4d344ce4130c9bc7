//go:build js && wasm

package raw

import (
	"context"
	"errors"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

// OpenOptions are the hooks of OpenDatabase. Every hook runs on the
// JavaScript event loop, inside the event that calls it: it must return at
// once (start a goroutine for anything that waits).
type OpenOptions struct {
	// Upgrade runs inside the versionchange transaction when the database is
	// created or its version rises. It creates stores and indexes on db and
	// may issue requests on tx (fire and check, or Iterate for per-record
	// migrations) but never await. An error (or panic) aborts the upgrade:
	// nothing of it remains and OpenDatabase returns the error.
	Upgrade func(db js.Value, tx *Tx, oldVersion, newVersion uint64) error
	// Blocked hears that other connections keep the database open at an
	// older version; the open keeps waiting until they close or ctx ends.
	Blocked func(oldVersion, newVersion uint64)
	// Opened receives the connection the moment it opens, before any later
	// event can reach it: the place to install onversionchange and onclose
	// without a window in which a versionchange could be missed.
	Opened func(db js.Value)
	// SpareWritesWithout: every transaction of the connection goes through
	// the page's freeze tracker (freeze_js.go), which aborts the open ones
	// when the page freezes. When non-nil, readwrite transactions whose
	// scope holds none of these stores are spared: they carry the app's own
	// writes (an outbox's enqueue), which finish on resume. Nil spares none.
	SpareWritesWithout []string
	// Factory is the IDBFactory to open with; zero means globalThis.indexedDB.
	// A Storage Bucket's indexedDB (navigator.storageBuckets) is one: it has
	// its own quota and eviction policy.
	Factory js.Value
}

func factory() (js.Value, error) {
	f := js.Global().Get("indexedDB")
	if f.Type() != js.TypeObject {
		return js.Undefined(), jsglue.ErrUnavailable
	}
	return f, nil
}

// OpenDatabase opens (creating or upgrading as needed) database name at
// version (0: its current version, creating it at 1) and returns the
// IDBDatabase. If ctx ends first it returns ctx.Err(); the open then goes on
// without us: an upgrade it reaches is aborted and a connection it yields is
// closed at once.
func OpenDatabase(ctx context.Context, name string, version uint64, o OpenOptions) (js.Value, error) {
	if err := ctx.Err(); err != nil {
		return js.Undefined(), err
	}
	f, err := factory()
	if o.Factory.Type() == js.TypeObject {
		f, err = o.Factory, nil
	}
	if err != nil {
		return js.Undefined(), err
	}
	var req js.Value
	if version == 0 {
		req, err = call(f, "open", name)
	} else {
		req, err = call(f, "open", name, float64(version))
	}
	if err != nil {
		return js.Undefined(), err
	}
	op := &opening{req: req, o: o, ch: make(chan openResult, 1)}
	op.listen()
	return op.wait(ctx)
}

type openResult struct {
	db  js.Value
	err error
}

// opening is one open request under way: its events, on the event loop,
// and the caller, who may give up when its ctx ends.
type opening struct {
	req js.Value // the IDBOpenDBRequest
	o   OpenOptions
	ch  chan openResult
	cb  *jsglue.Callback

	mu        sync.Mutex
	abandoned bool // ctx ended: the caller is gone
	delivered bool // a result is in ch
	upErr     error
	upTx      *Tx
}

// listen installs one callback for the request's four events.
func (op *opening) listen() {
	op.cb = jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
		if len(args) == 0 {
			return nil
		}
		ev := js.Undefined()
		if len(args) > 1 {
			ev = args[1]
		}
		switch args[0].Int() {
		case 0:
			op.onUpgradeNeeded(ev)
		case 1:
			op.onBlocked(ev)
		case 2:
			op.onSuccess()
		case 3:
			op.onError(ev)
		}
		return nil
	})
	op.req.Set("onupgradeneeded", op.cb.Value.Call("bind", nil, 0))
	op.req.Set("onblocked", op.cb.Value.Call("bind", nil, 1))
	op.req.Set("onsuccess", op.cb.Value.Call("bind", nil, 2))
	op.req.Set("onerror", op.cb.Value.Call("bind", nil, 3))
}

// onUpgradeNeeded runs the Upgrade hook in the versionchange transaction,
// or aborts it when the caller is gone or the hook fails.
func (op *opening) onUpgradeNeeded(ev js.Value) {
	tx := wrapTx(op.req.Get("transaction"))
	op.mu.Lock()
	a := op.abandoned
	op.upTx = tx
	op.mu.Unlock()
	var err error
	if a {
		err = context.Canceled
	} else if op.o.Upgrade != nil {
		err = runHook(func() error {
			return op.o.Upgrade(op.req.Get("result"), tx, uint64(numOr(ev.Get("oldVersion"), 0)), uint64(numOr(ev.Get("newVersion"), 0)))
		})
	}
	if err != nil {
		op.mu.Lock()
		op.upErr = err
		op.mu.Unlock()
		_ = tx.AbortWith(err)
	}
}

func (op *opening) onBlocked(ev js.Value) {
	if op.o.Blocked != nil {
		_ = runHook(func() error {
			op.o.Blocked(uint64(numOr(ev.Get("oldVersion"), 0)), uint64(numOr(ev.Get("newVersion"), 0)))
			return nil
		})
	}
}

// onSuccess hands the connection to the caller, or closes it when the
// caller is gone.
func (op *opening) onSuccess() {
	op.cb.Release()
	db := op.req.Get("result")
	op.mu.Lock()
	a := op.abandoned
	op.delivered = !a
	op.mu.Unlock()
	if a {
		db.Call("close")
		return
	}
	track(db, op.o.SpareWritesWithout)
	if op.o.Opened != nil {
		_ = runHook(func() error { op.o.Opened(db); return nil })
	}
	op.ch <- openResult{db: db}
}

// onError delivers the open's failure: the upgrade's own error when it
// had one, else the request's.
func (op *opening) onError(ev js.Value) {
	op.cb.Release()
	if ev.Type() == js.TypeObject {
		ev.Call("preventDefault")
	}
	op.mu.Lock()
	err := op.upErr
	if err == nil && op.upTx != nil && op.upTx.firstErr != nil {
		err = op.upTx.firstErr // a request of the upgrade failed at once
	}
	op.delivered = true
	op.mu.Unlock()
	if err == nil {
		err = requestError(op.req)
	}
	op.ch <- openResult{err: err}
}

// wait returns the open's result, or ctx.Err() when ctx ends before one
// was delivered.
func (op *opening) wait(ctx context.Context) (js.Value, error) {
	select {
	case r := <-op.ch:
		return r.db, r.err
	case <-ctx.Done():
	}
	op.mu.Lock()
	if op.delivered {
		op.mu.Unlock()
		r := <-op.ch
		if r.err == nil {
			return r.db, nil // opened before we gave up: hand it over
		}
		return js.Undefined(), r.err
	}
	op.abandoned = true
	op.mu.Unlock()
	return js.Undefined(), ctx.Err()
}

// DeleteDatabase deletes database name. blocked (may be nil; called on the
// event loop) hears connections that do not close on versionchange, while
// DeleteDatabase keeps waiting until they do or ctx ends.
func DeleteDatabase(ctx context.Context, name string, blocked func(oldVersion uint64)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := factory()
	if err != nil {
		return err
	}
	req, err := call(f, "deleteDatabase", name)
	if err != nil {
		return err
	}
	ch := make(chan error, 1)
	var cb *jsglue.Callback
	cb = jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
		if len(args) == 0 {
			return nil
		}
		switch args[0].Int() {
		case 0: // success
			cb.Release()
			ch <- nil
		case 1: // error
			cb.Release()
			ch <- requestError(req)
		case 2: // blocked
			if blocked != nil && len(args) > 1 {
				old := uint64(numOr(args[1].Get("oldVersion"), 0))
				_ = runHook(func() error { blocked(old); return nil })
			}
		}
		return nil
	})
	req.Set("onsuccess", cb.Value.Call("bind", nil, 0))
	req.Set("onerror", cb.Value.Call("bind", nil, 1))
	req.Set("onblocked", cb.Value.Call("bind", nil, 2))
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

var errHookPanic = errors.New("idb: panic in an open hook")

// runHook runs a caller's hook on the event loop, turning a panic into an
// error: a panic there would otherwise be swallowed by jsglue and leave the
// open waiting forever.
func runHook(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errHookPanic
		}
	}()
	return fn()
}

func numOr(v js.Value, def float64) float64 {
	if v.Type() != js.TypeNumber {
		return def
	}
	return v.Float()
}
