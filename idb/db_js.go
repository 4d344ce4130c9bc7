//go:build js && wasm

package idb

import (
	"context"
	"errors"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/jsglue"
)

// Option configures Open.
type Option func(*config)

type config struct {
	schema    Schema
	onEvent   func(Event)
	recentOps int
	own       []string
}

// WithOwnStores declares stores of a tabfence layer built on this package
// (a runtime with records of its own beside the app's): their names start
// with "tf_", which apps may not use, and are neither tf_epochs nor
// tf_fences. Whichever upgrade finds one missing creates it (out-of-line
// keys), and Apply's stores, its WriteTx and Get accept them, so the layer
// writes them in the same fenced transaction as the app's stores. An app's
// UpgradeTx still refuses them.
func WithOwnStores(names ...string) Option {
	return func(c *config) { c.own = append(c.own, names...) }
}

func (c *config) owns(name string) bool {
	for _, n := range c.own {
		if n == name {
			return true
		}
	}
	return false
}

func (c *config) validOwn() error {
	for _, n := range c.own {
		if !reserved(n) || n == StoreEpochs || n == StoreFences {
			return errors.Join(ErrInvalidSchema, errors.New("idb: own store "+n+" must start with tf_ and not be tabfence's"))
		}
	}
	return nil
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
	conn    js.Value // the IDBDatabase

	// Scopes of the hot transactions, converted to JavaScript once. The
	// stores of an open connection never change: only an upgrade changes
	// them, and it needs this connection closed first.
	appStores   []string
	scopeEpochs js.Value
	scopeAll    js.Value // tf_epochs, tf_fences and every app store

	// The loader's apply and allocate hooks (fast.js) for this connection,
	// or undefined: made at open.
	applyHook, allocHook js.Value

	mu     sync.Mutex
	err    error
	done   chan struct{}
	cbs    []*jsglue.Callback
	closed bool
	opened bool // Open returned d: events are reported from then on

	// The last owner ID AllocateToken converted to JavaScript.
	owner    string
	ownerV   js.Value
	ownerSet bool
}

// Open opens (creating or upgrading as needed) the database name with the
// schema's version. tabfence's stores tf_epochs and tf_fences are created by
// whichever upgrade finds them missing. If another connection blocks the
// upgrade, a Blocked event is sent and Open keeps waiting until ctx ends.
//
// One connection does everything: it runs the upgrade, hears "blocked", and
// listens for versionchange from the moment it exists (OpenOptions.Opened),
// so there is no window in which another tab's delete or upgrade could find
// it deaf.
func Open(ctx context.Context, name string, opts ...Option) (*DB, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.schema.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.validOwn(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	version := cfg.schema.Version()
	d := &DB{name: name, version: version, cfg: cfg, done: make(chan struct{})}
	conn, err := raw.OpenDatabase(ctx, name, version, raw.OpenOptions{
		Upgrade: func(db js.Value, tx *raw.Tx, oldV, newV uint64) error {
			return runUpgrade(&UpgradeTx{DB: db, Tx: tx.JS(), OldVersion: oldV, NewVersion: newV, tx: tx}, cfg.schema, cfg.own)
		},
		Blocked: func(oldV, newV uint64) {
			if fn := cfg.onEvent; fn != nil {
				go fn(Event{Kind: Blocked, Name: name, OldVersion: oldV, NewVersion: newV})
			}
		},
		Opened: d.listen,
	})
	if err != nil {
		return nil, err
	}
	names := storeNames(conn)
	missing := !contains(names, StoreEpochs) || !contains(names, StoreFences)
	for _, n := range cfg.own {
		missing = missing || !contains(names, n)
	}
	if missing {
		// A database at our version without our stores was made by someone
		// else (a foreign script, a build that predates them): never write
		// into it.
		d.shutQuiet()
		return nil, ErrDeleted
	}
	for _, n := range names {
		if !reserved(n) {
			d.appStores = append(d.appStores, n)
		}
	}
	d.scopeEpochs = raw.JSString(StoreEpochs)
	d.scopeAll = raw.ScopeOf(append([]string{StoreEpochs, StoreFences}, d.appStores...))
	d.applyHook, d.allocHook = hooksFor(conn)
	if testHookBetweenOpens != nil {
		testHookBetweenOpens(name)
	}
	d.mu.Lock()
	if d.err != nil {
		// Deleted or upgraded by another tab before we could return it.
		err := d.err
		d.mu.Unlock()
		return nil, err
	}
	d.opened = true
	d.mu.Unlock()
	return d, nil
}

func storeNames(db js.Value) []string {
	list := db.Get("objectStoreNames")
	n := list.Length()
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, list.Call("item", i).String())
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// testHookBetweenOpens lets a test delete the database after the connection
// opened and before Open returns it.
var testHookBetweenOpens func(name string)

func runUpgrade(tx *UpgradeTx, s Schema, own []string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("idb: panic in schema upgrade")
		}
	}()
	for _, st := range append([]string{StoreEpochs, StoreFences}, own...) {
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

	tx *raw.Tx
}

// Store returns an app store of the upgrade transaction, for data
// migrations: issue requests (Iterate for per-record work), never await.
// tabfence's own stores are refused (their Err is ErrReservedStore).
func (u *UpgradeTx) Store(name string) raw.Store {
	if reserved(name) {
		return u.tx.RefusedStore(ErrReservedStore)
	}
	return u.tx.Store(name)
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
// It runs inside the open's success event (OpenOptions.Opened).
func (d *DB) listen(db js.Value) {
	d.conn = db
	add := func(prop string, fn func(ev js.Value)) {
		cb := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
			ev := js.Undefined()
			if len(args) > 0 {
				ev = args[0]
			}
			fn(ev)
			return nil
		})
		d.cbs = append(d.cbs, cb)
		db.Set(prop, cb.Value)
	}
	add("onversionchange", func(ev js.Value) {
		var nv *uint64
		if n := ev.Get("newVersion"); n.Type() == js.TypeNumber {
			v := uint64(n.Float())
			nv = &v
		}
		e := Event{Kind: classifyVersionChange(nv), Name: d.name}
		if o := ev.Get("oldVersion"); o.Type() == js.TypeNumber {
			e.OldVersion = uint64(o.Float())
		}
		if nv != nil {
			e.NewVersion = *nv
		}
		d.shut(e)
	})
	add("onclose", func(js.Value) {
		d.shut(Event{Kind: ClosedByBrowser, Name: d.name, OldVersion: d.version})
	})
}

// shut closes the connection for the reason e and tells the app once (if
// Open has returned it; before, Open reports the error itself).
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
	notify := d.opened
	d.mu.Unlock()
	d.conn.Call("close")
	for _, c := range cbs {
		c.Release()
	}
	close(d.done)
	if fn := d.cfg.onEvent; fn != nil && notify {
		go fn(e)
	}
}

// shutQuiet closes a connection Open will not return.
func (d *DB) shutQuiet() {
	_ = d.Close()
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
	_, err := jsglue.Call(d.conn, "close")
	return err
}

// Done is closed when the connection closes: by Close, or because another
// tab deleted or upgraded the database. A leader selects on it to step down.
func (d *DB) Done() <-chan struct{} { return d.done }

// Err is nil while the connection is open, then ErrClosed, ErrDeleted or
// ErrUpgraded.
func (d *DB) Err() error {
	d.mu.Lock()
	err := d.err
	d.mu.Unlock()
	return err
}

// Name and Version of the open database.
func (d *DB) Name() string    { return d.name }
func (d *DB) Version() uint64 { return d.version }

// JS is the connection (an IDBDatabase), for transactions of one's own on it
// (raw.Begin, or plain JavaScript) beside this package's: one connection, so one
// version-change handling, for both.
func (d *DB) JS() js.Value { return d.conn }

// Delete deletes the database name. Every tabfence connection to it closes
// itself and reports Deleted; onBlocked (may be nil) hears a connection that
// does not close (an old build), while Delete keeps waiting until ctx ends.
func Delete(ctx context.Context, name string, onBlocked func(Event)) error {
	var blocked func(uint64)
	if onBlocked != nil {
		blocked = func(old uint64) { go onBlocked(Event{Kind: Blocked, Name: name, OldVersion: old}) }
	}
	return raw.DeleteDatabase(ctx, name, blocked)
}
