//go:build js && wasm

package idb

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall/js"

	goidb "github.com/hack-pad/go-indexeddb/idb"
	"github.com/tabfence/tabfence/jsglue"
)

// Option configures Open.
type Option func(*config)

type config struct {
	schema    Schema
	onEvent   func(Event)
	recentOps int
}

// WithSchema declares the app's stores through ordered upgrade steps.
func WithSchema(s Schema) Option { return func(c *config) { c.schema = s } }

// WithEvents registers fn to hear Blocked, Deleted, Upgraded and
// ClosedByBrowser events. fn runs on its own goroutine, so it may block (for
// example to step down from leadership and release a Web Lock).
func WithEvents(fn func(Event)) Option { return func(c *config) { c.onEvent = fn } }

// WithRecentOps sets how many applied operation IDs a fence remembers per
// resource (default DefaultRecentOps, at most MaxRecentOps). See
// FenceRecord for the bound.
func WithRecentOps(n int) Option { return func(c *config) { c.recentOps = n } }

// DB is an open database. When another tab deletes or upgrades it, the
// connection closes itself at once — it never blocks the other tab — and
// Done is closed, Err says why, and the WithEvents callback hears it.
type DB struct {
	name    string
	version uint64
	cfg     config
	db      *goidb.Database
	raw     js.Value

	mu     sync.Mutex
	err    error
	done   chan struct{}
	cbs    []*jsglue.Callback
	closed bool
}

// Open opens (creating or upgrading as needed) the database name with the
// schema's version. tabfence's stores tf_epochs and tf_fences are created by
// whichever upgrade finds them missing. If another connection blocks the
// upgrade, a Blocked event is sent and Open keeps waiting until ctx ends.
func Open(ctx context.Context, name string, opts ...Option) (*DB, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.schema.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	factory := js.Global().Get("indexedDB")
	if factory.Type() != js.TypeObject {
		return nil, jsglue.ErrUnavailable
	}
	version := cfg.schema.Version()
	// Connection 1 (raw JavaScript) runs the upgrade and hears "blocked",
	// which go-indexeddb does not expose.
	upgradeConn, err := openRaw(ctx, factory, name, version, &cfg)
	if err != nil {
		return nil, err
	}
	closer := jsglue.NewCallback(func(js.Value, []js.Value) any { upgradeConn.Call("close"); return nil })
	// Never block another tab's delete or upgrade while this short-lived
	// connection is open.
	upgradeConn.Set("onversionchange", closer.Value)
	defer func() {
		upgradeConn.Call("close")
		closer.Release()
	}()

	// Connection 2 is go-indexeddb's, used for every transaction. Same
	// version, so it needs no upgrade unless the database changed since.
	d := &DB{name: name, version: version, cfg: cfg, done: make(chan struct{})}
	type opened struct {
		req *goidb.OpenDBRequest
		db  *goidb.Database
		err error
	}
	if testHookBetweenOpens != nil {
		testHookBetweenOpens(name)
	}
	ch := make(chan opened, 1)
	var raced bool
	go func() {
		// This connection must never upgrade: an upgrade here means the
		// database was deleted between the two opens and is being re-created
		// without our stores. go-indexeddb neither exposes the versionchange
		// transaction nor survives an upgrader error (it panics), so the
		// upgrade is made to abort by a request that fails (a second Add of
		// one key): the creation is rolled back and Open reports ErrDeleted.
		req, err := goidb.Global().Open(context.Background(), name, uint(version), func(db *goidb.Database, _, _ uint) error {
			raced = true
			st, err := db.CreateObjectStore("tf_abort", goidb.ObjectStoreOptions{})
			if err != nil {
				_ = db.Close()
				return nil
			}
			_, _ = st.AddKey(js.ValueOf(0), js.Null())
			_, _ = st.AddKey(js.ValueOf(0), js.Null())
			return nil
		})
		if err != nil {
			ch <- opened{err: mapErr(err)}
			return
		}
		db, err := req.Await(context.Background())
		ch <- opened{req: req, db: db, err: mapErr(err)}
	}()
	var o opened
	select {
	case o = <-ch:
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.db != nil {
				_ = o.db.Close()
			}
		}()
		return nil, ctx.Err()
	}
	if raced {
		if o.db != nil {
			_ = o.db.Close()
		}
		return nil, ErrDeleted
	}
	if o.err != nil {
		return nil, o.err
	}
	d.db = o.db
	d.raw, _ = o.req.Request.Result()
	names, err := o.db.ObjectStoreNames()
	if err != nil || !contains(names, StoreEpochs) || !contains(names, StoreFences) {
		_ = o.db.Close()
		return nil, ErrDeleted
	}
	d.listen()
	return d, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// testHookBetweenOpens lets a test delete the database between the two opens.
var testHookBetweenOpens func(name string)

// openRaw opens the database with plain JavaScript and runs the upgrade.
func openRaw(ctx context.Context, factory js.Value, name string, version uint64, cfg *config) (js.Value, error) {
	req, err := jsglue.Call(factory, "open", name, float64(version))
	if err != nil {
		return js.Undefined(), err
	}
	type result struct {
		db  js.Value
		err error
	}
	var (
		mu        sync.Mutex
		abandoned bool
		upErr     error
		cbs       []*jsglue.Callback
	)
	ch := make(chan result, 1)
	release := func() {
		for _, c := range cbs {
			c.Release()
		}
	}
	on := func(event string, fn func(ev js.Value)) {
		cb := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
			ev := js.Undefined()
			if len(args) > 0 {
				ev = args[0]
			}
			fn(ev)
			return nil
		})
		cbs = append(cbs, cb)
		req.Set(event, cb.Value)
	}
	on("onupgradeneeded", func(ev js.Value) {
		oldV := uint64(numOr(ev.Get("oldVersion"), 0))
		newV := uint64(numOr(ev.Get("newVersion"), 0))
		tx := req.Get("transaction")
		err := runUpgrade(&UpgradeTx{DB: req.Get("result"), Tx: tx, OldVersion: oldV, NewVersion: newV}, cfg.schema)
		if err != nil {
			mu.Lock()
			upErr = err
			mu.Unlock()
			_, _ = jsglue.Call(tx, "abort")
		}
	})
	on("onblocked", func(ev js.Value) {
		e := Event{Kind: Blocked, Name: name, OldVersion: uint64(numOr(ev.Get("oldVersion"), 0)), NewVersion: uint64(numOr(ev.Get("newVersion"), 0))}
		if fn := cfg.onEvent; fn != nil {
			go fn(e)
		}
	})
	on("onsuccess", func(js.Value) {
		db := req.Get("result")
		mu.Lock()
		a := abandoned
		mu.Unlock()
		release()
		if a {
			db.Call("close")
			return
		}
		ch <- result{db: db}
	})
	on("onerror", func(ev js.Value) {
		if ev.Type() == js.TypeObject {
			ev.Call("preventDefault")
		}
		mu.Lock()
		err := upErr
		mu.Unlock()
		release()
		if err == nil {
			err = jsglue.FromJS(req.Get("error"))
		}
		ch <- result{err: err}
	})
	select {
	case r := <-ch:
		return r.db, r.err
	case <-ctx.Done():
		mu.Lock()
		abandoned = true
		mu.Unlock()
		return js.Undefined(), ctx.Err()
	}
}

func numOr(v js.Value, def float64) float64 {
	if v.Type() != js.TypeNumber {
		return def
	}
	return v.Float()
}

func runUpgrade(tx *UpgradeTx, s Schema) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("idb: panic in schema upgrade")
		}
	}()
	for _, st := range []string{StoreEpochs, StoreFences} {
		if !tx.HasStore(st) {
			if _, err := jsglue.Call(tx.DB, "createObjectStore", st); err != nil {
				return err
			}
		}
	}
	for _, st := range s.stepsBetween(tx.OldVersion, tx.NewVersion) {
		if st.Upgrade == nil {
			continue
		}
		if err := st.Upgrade(tx); err != nil {
			return err
		}
	}
	return nil
}

// UpgradeTx is handed to schema steps. It runs inside the versionchange
// transaction, on the JavaScript event loop: issue requests, never await or
// wait on anything (a timer, a lock, a channel), or the transaction ends.
type UpgradeTx struct {
	DB         js.Value // the IDBDatabase being upgraded
	Tx         js.Value // the versionchange IDBTransaction
	OldVersion uint64   // 0 when the database is new
	NewVersion uint64
}

// CreateStore creates an app object store.
func (u *UpgradeTx) CreateStore(name string, o StoreOptions) error {
	if reserved(name) {
		return ErrReservedStore
	}
	opts := map[string]any{"autoIncrement": o.AutoIncrement}
	if o.KeyPath != "" {
		opts["keyPath"] = o.KeyPath
	}
	_, err := jsglue.Call(u.DB, "createObjectStore", name, opts)
	return err
}

// DeleteStore deletes an app object store.
func (u *UpgradeTx) DeleteStore(name string) error {
	if reserved(name) {
		return ErrReservedStore
	}
	_, err := jsglue.Call(u.DB, "deleteObjectStore", name)
	return err
}

// HasStore reports whether the store exists.
func (u *UpgradeTx) HasStore(name string) bool {
	ok, err := jsglue.Call(u.DB.Get("objectStoreNames"), "contains", name)
	return err == nil && ok.Truthy()
}

// CreateIndex adds an index to a store, new or existing.
func (u *UpgradeTx) CreateIndex(store, index, keyPath string, unique bool) error {
	if reserved(store) {
		return ErrReservedStore
	}
	s, err := jsglue.Call(u.Tx, "objectStore", store)
	if err != nil {
		return err
	}
	_, err = jsglue.Call(s, "createIndex", index, keyPath, map[string]any{"unique": unique})
	return err
}

// listen makes the connection close itself on versionchange and report it.
func (d *DB) listen() {
	add := func(event string, fn func(ev js.Value)) {
		cb := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
			ev := js.Undefined()
			if len(args) > 0 {
				ev = args[0]
			}
			fn(ev)
			return nil
		})
		d.cbs = append(d.cbs, cb)
		d.raw.Call("addEventListener", event, cb.Value)
	}
	add("versionchange", func(ev js.Value) {
		var nv *uint64
		if n := ev.Get("newVersion"); n.Type() == js.TypeNumber {
			v := uint64(n.Float())
			nv = &v
		}
		e := Event{Kind: classifyVersionChange(nv), Name: d.name, OldVersion: uint64(numOr(ev.Get("oldVersion"), 0))}
		if nv != nil {
			e.NewVersion = *nv
		}
		d.shut(e)
	})
	add("close", func(js.Value) {
		d.shut(Event{Kind: ClosedByBrowser, Name: d.name, OldVersion: d.version})
	})
}

// shut closes the connection for the reason e and tells the app once.
func (d *DB) shut(e Event) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	d.err = e.Kind.closeErr()
	cbs := d.cbs
	d.cbs = nil
	d.mu.Unlock()
	_ = d.db.Close()
	for _, c := range cbs {
		c.Release()
	}
	close(d.done)
	if fn := d.cfg.onEvent; fn != nil {
		go fn(e)
	}
}

// Close closes the connection. Safe to call more than once.
func (d *DB) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.err = ErrClosed
	cbs := d.cbs
	d.cbs = nil
	d.mu.Unlock()
	for _, c := range cbs {
		c.Release()
	}
	close(d.done)
	return mapErr(d.db.Close())
}

// Done is closed when the connection closes: by Close, or because another
// tab deleted or upgraded the database. A leader selects on it to step down.
func (d *DB) Done() <-chan struct{} { return d.done }

// Err is nil while the connection is open, then ErrClosed, ErrDeleted or
// ErrUpgraded.
func (d *DB) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// Name and Version of the open database.
func (d *DB) Name() string    { return d.name }
func (d *DB) Version() uint64 { return d.version }

// Delete deletes the database name. Every tabfence connection to it closes
// itself and reports Deleted; onBlocked (may be nil) hears a connection that
// does not close (an old build), while Delete keeps waiting until ctx ends.
func Delete(ctx context.Context, name string, onBlocked func(Event)) error {
	factory := js.Global().Get("indexedDB")
	if factory.Type() != js.TypeObject {
		return jsglue.ErrUnavailable
	}
	req, err := jsglue.Call(factory, "deleteDatabase", name)
	if err != nil {
		return err
	}
	ch := make(chan error, 1)
	var cbs []*jsglue.Callback
	release := func() {
		for _, c := range cbs {
			c.Release()
		}
	}
	on := func(event string, fn func(ev js.Value)) {
		cb := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
			ev := js.Undefined()
			if len(args) > 0 {
				ev = args[0]
			}
			fn(ev)
			return nil
		})
		cbs = append(cbs, cb)
		req.Set(event, cb.Value)
	}
	on("onsuccess", func(js.Value) { release(); ch <- nil })
	on("onerror", func(js.Value) { release(); ch <- jsglue.FromJS(req.Get("error")) })
	on("onblocked", func(ev js.Value) {
		if onBlocked != nil {
			go onBlocked(Event{Kind: Blocked, Name: name, OldVersion: uint64(numOr(ev.Get("oldVersion"), 0))})
		}
	})
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mapErr turns go-indexeddb's errors into jsglue's typed errors, so callers
// use errors.Is(err, jsglue.ErrQuotaExceeded) and the like.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	var je *jsglue.JSError
	if errors.As(err, &je) {
		return err
	}
	var de goidb.DOMException
	if errors.As(err, &de) {
		name, msg, _ := strings.Cut(de.Error(), ": ")
		return jsglue.NewJSError(name, msg)
	}
	var jerr js.Error
	if errors.As(err, &jerr) {
		return jsglue.FromJS(jerr.Value)
	}
	return err
}
