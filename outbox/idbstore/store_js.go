//go:build js && wasm

package idbstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall/js"

	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
)

// Object stores of the outbox database (schema version idbVersion).
const (
	// storeRecords holds the records under keyPath "seq" with a key
	// generator: IndexedDB assigns an appended record's Seq in the put
	// itself, monotonic across tabs and never reused (not even after a
	// delete), so an append needs no read of a counter before it can write
	// (that read was half the cost of an enqueue). Records are found by id
	// through the unique "id" index.
	storeRecords = "records"
	storeBlobs   = "blobs"  // Uint8Array payloads by PayloadRef
	storeLeases  = "leases" // keyPath "name": the fallback flush lease rows
	storeMeta    = "meta"   // one object under metaKey

	indexID     = "id"     // unique: the record id
	indexLive   = "live"   // records not acked, in seq order (sparse: fieldLive)
	indexOpKey  = "opKey"  // unsettled records by [user, operation key] (sparse)
	indexEntity = "entity" // unsettled records by entity key (sparse)
	indexStatus = "status" // every record, by status
	indexUser   = "user"   // every record, by user
	indexSchema = "schema" // every record, by payload schema version (v2)

	metaKey = "meta"

	// idbVersion is the database schema version. Bump it and add a step to
	// upgradeIDB for any change of stores, indexes or of a field's meaning.
	//   - 1: the stores and the id, live, opKey, entity, status, user indexes.
	//   - 2: the schema index (Status counts newer-schema records with it
	//     instead of reading every record).
	idbVersion = 2
)

// Error is an IndexedDB failure of one store operation. errors.Is sees
// through it: jsglue sentinels (ErrQuotaExceeded, ErrConstraint, ...),
// ErrTxAborted.
type Error struct {
	Op  string
	Err error
}

func (e *Error) Error() string { return "outbox: indexeddb " + e.Op + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Option configures Open.
type Option func(*idbConfig)

type idbConfig struct {
	durability string
	factory    js.Value
	onClose    func(error)
	onCorrupt  func(error)
}

// WithDurability sets the durability hint of Enqueue's transaction:
// "strict" (the default), "default" or "relaxed". See Open.
func WithDurability(d string) Option { return func(c *idbConfig) { c.durability = d } }

// WithIDBFactory opens the database in another IDBFactory, for example a
// Storage Bucket's (navigator.storageBuckets.open(name).indexedDB), which
// can be persisted, given its own quota and evicted apart from the app's data.
func WithIDBFactory(f js.Value) Option { return func(c *idbConfig) { c.factory = f } }

// WithOnClose registers fn, called once (on its own goroutine) when the
// connection closes for a reason other than Close: ErrStoreDeleted (another
// tab deleted the database: stop, the queue is gone), ErrStoreUpgraded (a
// newer build needs the database: reload this tab) or ErrStoreClosed (the
// browser closed it, e.g. site data cleared).
func WithOnClose(fn func(error)) Option { return func(c *idbConfig) { c.onClose = fn } }

// WithOnCorrupt registers fn, told (synchronously, keep it short and do not
// call the store from it) about every stored value that does not decode.
func WithOnCorrupt(fn func(error)) Option { return func(c *idbConfig) { c.onCorrupt = fn } }

// Store is the IndexedDB outbox.Store: the durable queue every tab of the origin
// shares. Each method is one IndexedDB transaction with nothing but pure Go
// between its requests, and a readwrite method returns only after the
// transaction committed (nil error) or rolled back (error: nothing written).
//
// Contexts are honoured until a method issues its writes (it aborts and
// returns ctx.Err()); from then on it waits for the commit or abort, so the
// answer is always the truth. That wait is bounded: nothing in the
// transaction waits for the outside world.
type Store struct {
	name       string
	db         js.Value
	durability raw.Durability // of Enqueue's transaction
	cfg        idbConfig

	mu          sync.Mutex
	err         error
	done        chan struct{}
	cbs         []*jsglue.Callback
	corrupt     atomic.Int64
	appendNames js.Value // [storeRecords], for AppendTarget
	// claimPage: records Claim reads per step; 0: twice the batch, at least 32.
	claimPage int
	durOpts   js.Value // {durability} of Enqueue, for AppendTarget; undefined for the default
}

var _ outbox.Store = (*Store)(nil)

// Open opens (creating or upgrading) the outbox database dbName
// (queue.Names). If a connection of an older build blocks the upgrade,
// it waits until ctx ends.
//
// Durability: Enqueue's transaction is "strict" unless WithDurability says
// otherwise. Enqueue promises the user that a mutation survives, and only
// strict waits until the data reached the disk; "default" leaves it to the
// browser, which may report success once the OS has the data, so an OS
// crash or a power loss could lose an acknowledged mutation. An enqueue is a user
// action, so strict's extra fraction of a millisecond is invisible. Every
// other write (claim, state transitions, leases, metadata, deletes) uses the
// browser's default: losing one to a power loss costs at most a resend that
// the idempotency key absorbs, or a lease that expires.
func Open(ctx context.Context, dbName string, opts ...Option) (*Store, error) {
	cfg := idbConfig{durability: "strict"}
	for _, o := range opts {
		o(&cfg)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if d := cfg.durability; d != "strict" && d != "relaxed" && d != "default" && d != "" {
		return nil, &Error{Op: "open", Err: jsglue.NewJSError("TypeError", "unknown durability "+quote(d))}
	}
	conn, err := raw.OpenDatabase(ctx, dbName, idbVersion, raw.OpenOptions{
		Factory: cfg.factory,
		// Runs inside upgradeneeded: issues requests, never awaits. An
		// error aborts the versionchange transaction: nothing of a
		// half-made schema remains.
		Upgrade: func(db js.Value, tx *raw.Tx, oldV, _ uint64) error { return upgradeIDB(db, tx.JS(), oldV, idbVersion) },
		// The page's freeze event aborts the flush path's transactions
		// (those over the leases or the metadata store, and every
		// readonly one: a frozen tab's would block every tab's claim and
		// status read) and spares the ones that hold the app's writes
		// (enqueue, amend, delete).
		SpareWritesWithout: []string{storeLeases, storeMeta},
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Op: "open", Err: err}
	}
	s := &Store{name: dbName, db: conn, cfg: cfg, done: make(chan struct{}), durOpts: js.Undefined()}
	switch cfg.durability {
	case "strict":
		s.durability = raw.DurabilityStrict
	case "relaxed":
		s.durability = raw.DurabilityRelaxed
	}
	if s.durability != raw.DurabilityDefault {
		s.durOpts = js.Global().Get("Object").New()
		s.durOpts.Set("durability", cfg.durability)
	}
	s.appendNames = js.Global().Get("Array").New(1)
	s.appendNames.SetIndex(0, storeRecords)
	for _, st := range []string{storeRecords, storeBlobs, storeLeases, storeMeta} {
		if ok, _ := jsglue.Call(conn.Get("objectStoreNames"), "contains", st); !ok.Truthy() {
			conn.Call("close")
			return nil, &Error{Op: "open", Err: errors.New("object store " + st + " missing (database damaged or deleted while opening)")}
		}
	}
	s.listen()
	return s, nil
}

// upgradeIDB creates or upgrades the schema from oldV to newV inside the
// versionchange transaction tx: each version's step runs when the database
// is older than it. Steps only create stores and indexes (IndexedDB fills a
// new index from the records already stored), so an upgrade never rewrites
// records.
func upgradeIDB(db, tx js.Value, oldV, newV uint64) error {
	if oldV < 1 && newV >= 1 {
		recs, err := jsglue.Call(db, "createObjectStore", storeRecords, map[string]any{"keyPath": "seq", "autoIncrement": true})
		if err != nil {
			return err
		}
		if _, err := jsglue.Call(recs, "createIndex", indexID, "id", map[string]any{"unique": true}); err != nil {
			return err
		}
		for _, ix := range [][2]string{
			{indexLive, fieldLive}, {indexOpKey, fieldOpKey},
			{indexEntity, fieldEntity}, {indexStatus, "status"}, {indexUser, "userId"},
		} {
			if _, err := jsglue.Call(recs, "createIndex", ix[0], ix[1]); err != nil {
				return err
			}
		}
		if _, err := jsglue.Call(db, "createObjectStore", storeLeases, map[string]any{"keyPath": "name"}); err != nil {
			return err
		}
		for _, st := range []string{storeBlobs, storeMeta} {
			if _, err := jsglue.Call(db, "createObjectStore", st); err != nil {
				return err
			}
		}
	}
	if oldV < 2 && newV >= 2 {
		recs, err := jsglue.Call(tx, "objectStore", storeRecords)
		if err != nil {
			return err
		}
		if _, err := jsglue.Call(recs, "createIndex", indexSchema, "payloadSchemaVersion"); err != nil {
			return err
		}
	}
	return nil
}

// listen closes the connection on versionchange, so this tab never blocks
// another tab's upgrade or delete, and tells deletion (newVersion null) from
// upgrade.
func (s *Store) listen() {
	add := func(event string, fn func(ev js.Value)) {
		cb := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
			ev := js.Undefined()
			if len(args) > 0 {
				ev = args[0]
			}
			fn(ev)
			return nil
		})
		s.cbs = append(s.cbs, cb)
		s.db.Call("addEventListener", event, cb.Value)
	}
	add("versionchange", func(ev js.Value) {
		reason := outbox.ErrStoreUpgraded
		if ev.Type() != js.TypeObject || ev.Get("newVersion").IsNull() {
			reason = outbox.ErrStoreDeleted
		}
		s.shut(reason)
	})
	add("close", func(js.Value) { s.shut(outbox.ErrStoreClosed) })
}

// shut closes the connection for reason and tells the app once.
func (s *Store) shut(reason error) {
	if s.closeFor(reason) {
		if fn := s.cfg.onClose; fn != nil {
			go fn(reason)
		}
	}
}

// Close closes the connection (pending transactions still finish). Later
// calls fail with ErrStoreClosed. Safe to call more than once.
func (s *Store) Close() error {
	s.closeFor(outbox.ErrStoreClosed)
	return nil
}

// closeFor closes the connection with reason as the store's error, unless
// it is closed already (false).
func (s *Store) closeFor(reason error) bool {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return false
	}
	s.err = reason
	cbs := s.cbs
	s.cbs = nil
	s.mu.Unlock()
	s.db.Call("close")
	for _, c := range cbs {
		c.Release()
	}
	close(s.done)
	return true
}

// Done is closed when the connection closes, for whatever reason.
func (s *Store) Done() <-chan struct{} { return s.done }

// Err is nil while the store is open, then ErrStoreClosed, ErrStoreDeleted
// or ErrStoreUpgraded.
func (s *Store) Err() error {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	return err
}

// Name is the database name.
func (s *Store) Name() string { return s.name }

// AbortOpen aborts the store's open transactions, as the page's freeze
// event would (raw.AbortOpen): for a runtime that learns another tab stole
// its lock while it was frozen or hung.
func (s *Store) AbortOpen() { raw.AbortOpen(s.db) }

// Corrupt reports how many undecodable stored values this store has met
// (and skipped) so far, over all calls.
func (s *Store) Corrupt() int64 { return s.corrupt.Load() }

func (s *Store) sawCorrupt(err error) {
	s.corrupt.Add(1)
	if fn := s.cfg.onCorrupt; fn != nil {
		fn(err)
	}
}

// testHook, when set by a test, runs before a readwrite method commits its
// writes (stage "written"): an error aborts the transaction.
var idbTestHook func(op, stage string) error

func hook(op, stage string) error {
	if h := idbTestHook; h != nil {
		return h(op, stage)
	}
	return nil
}

// end finishes a write transaction of op once every write is issued: the
// test hook's "written" point (where a test may abort it), then the commit,
// asked for at once (no request follows), and its outcome.
func (t *txn) end(op string) error {
	if err := hook(op, "written"); err != nil {
		return t.abort(err)
	}
	t.commit()
	if err := t.finish(); err != nil {
		return wrapIDB(op, err)
	}
	return nil
}
