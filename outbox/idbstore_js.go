//go:build js && wasm

package outbox

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/jsglue"
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

// IDBError is an IndexedDB failure of one store operation. errors.Is sees
// through it: jsglue sentinels (ErrQuotaExceeded, ErrConstraint, ...),
// ErrTxAborted.
type IDBError struct {
	Op  string
	Err error
}

func (e *IDBError) Error() string { return "outbox: indexeddb " + e.Op + ": " + e.Err.Error() }
func (e *IDBError) Unwrap() error { return e.Err }

// IDBName is the database name of a queue scope at protocol 1 (see Names,
// which names the database of every protocol): each outbox has its own
// database, so its schema evolves and can be deleted on its own.
func IDBName(queue string) string { return protocol1DB(queue) }

// IDBOption configures OpenIDBStore.
type IDBOption func(*idbConfig)

type idbConfig struct {
	durability string
	factory    js.Value
	onClose    func(error)
	onCorrupt  func(error)
}

// WithDurability sets the durability hint of Enqueue's transaction:
// "strict" (the default), "default" or "relaxed". See OpenIDBStore.
func WithDurability(d string) IDBOption { return func(c *idbConfig) { c.durability = d } }

// WithIDBFactory opens the database in another IDBFactory, for example a
// Storage Bucket's (navigator.storageBuckets.open(name).indexedDB), which
// can be persisted, given its own quota and evicted apart from the app's data.
func WithIDBFactory(f js.Value) IDBOption { return func(c *idbConfig) { c.factory = f } }

// WithOnClose registers fn, called once (on its own goroutine) when the
// connection closes for a reason other than Close: ErrStoreDeleted (another
// tab deleted the database: stop, the queue is gone), ErrStoreUpgraded (a
// newer build needs the database: reload this tab) or ErrStoreClosed (the
// browser closed it, e.g. site data cleared).
func WithOnClose(fn func(error)) IDBOption { return func(c *idbConfig) { c.onClose = fn } }

// WithOnCorrupt registers fn, told (synchronously, keep it short and do not
// call the store from it) about every stored value that does not decode.
func WithOnCorrupt(fn func(error)) IDBOption { return func(c *idbConfig) { c.onCorrupt = fn } }

// IDBStore is the IndexedDB Store: the durable queue every tab of the origin
// shares. Each method is one IndexedDB transaction with nothing but pure Go
// between its requests, and a readwrite method returns only after the
// transaction committed (nil error) or rolled back (error: nothing written).
//
// Contexts are honoured until a method issues its writes (it aborts and
// returns ctx.Err()); from then on it waits for the commit or abort, so the
// answer is always the truth. That wait is bounded: nothing in the
// transaction waits for the outside world.
type IDBStore struct {
	name       string
	db         js.Value
	durability string
	cfg        idbConfig

	mu      sync.Mutex
	err     error
	done    chan struct{}
	cbs     []*jsglue.Callback
	corrupt atomic.Int64
	names   map[string]js.Value // cached store-name arrays (namesOf)
	pool    []*txn              // finished txns, reusable (getTxn)
	// claimPage: records Claim reads per step; 0: twice the batch, at least 32.
	claimPage int
	durOpts   js.Value // {durability} of Enqueue
}

var _ Store = (*IDBStore)(nil)

// OpenIDBStore opens (creating or upgrading) the outbox database dbName
// (see IDBName). If a connection of an older build blocks the upgrade,
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
func OpenIDBStore(ctx context.Context, dbName string, opts ...IDBOption) (*IDBStore, error) {
	cfg := idbConfig{durability: "strict"}
	for _, o := range opts {
		o(&cfg)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	raw, err := idb.OpenDatabase(ctx, dbName, idbVersion, idb.OpenOptions{
		Factory: cfg.factory,
		// Runs inside upgradeneeded: issues requests, never awaits. An
		// error aborts the versionchange transaction: nothing of a
		// half-made schema remains.
		Upgrade: func(db js.Value, tx *idb.Tx, oldV, _ uint64) error { return upgradeIDB(db, tx.JS(), oldV, idbVersion) },
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
		return nil, &IDBError{Op: "open", Err: err}
	}
	o := struct{ raw js.Value }{raw}
	s := &IDBStore{name: dbName, db: o.raw, durability: cfg.durability, cfg: cfg, done: make(chan struct{})}
	if cfg.durability == "default" {
		s.durability = ""
	}
	s.names = map[string]js.Value{}
	s.durOpts = js.Global().Get("Object").New()
	s.durOpts.Set("durability", s.durability)
	for _, st := range []string{storeRecords, storeBlobs, storeLeases, storeMeta} {
		if ok, _ := jsglue.Call(o.raw.Get("objectStoreNames"), "contains", st); !ok.Truthy() {
			o.raw.Call("close")
			return nil, &IDBError{Op: "open", Err: errors.New("object store " + st + " missing (database damaged or deleted while opening)")}
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
func (s *IDBStore) listen() {
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
		reason := ErrStoreUpgraded
		if ev.Type() != js.TypeObject || ev.Get("newVersion").IsNull() {
			reason = ErrStoreDeleted
		}
		s.shut(reason)
	})
	add("close", func(js.Value) { s.shut(ErrStoreClosed) })
}

// shut closes the connection for reason and tells the app once.
func (s *IDBStore) shut(reason error) {
	if s.closeFor(reason) {
		if fn := s.cfg.onClose; fn != nil {
			go fn(reason)
		}
	}
}

// Close closes the connection (pending transactions still finish). Later
// calls fail with ErrStoreClosed. Safe to call more than once.
func (s *IDBStore) Close() error {
	s.closeFor(ErrStoreClosed)
	return nil
}

// closeFor closes the connection with reason as the store's error, unless
// it is closed already (false).
func (s *IDBStore) closeFor(reason error) bool {
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
func (s *IDBStore) Done() <-chan struct{} { return s.done }

// Err is nil while the store is open, then ErrStoreClosed, ErrStoreDeleted
// or ErrStoreUpgraded.
func (s *IDBStore) Err() error {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	return err
}

// Name is the database name.
func (s *IDBStore) Name() string { return s.name }

// Corrupt reports how many undecodable stored values this store has met
// (and skipped) so far, over all calls.
func (s *IDBStore) Corrupt() int64 { return s.corrupt.Load() }

func (s *IDBStore) sawCorrupt(err error) {
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
// test hook's "written" point (where a test may abort it), then the
// commit's outcome.
func (t *txn) end(op string) error {
	if err := hook(op, "written"); err != nil {
		return t.abort(err)
	}
	if err := t.finish(); err != nil {
		return wrapIDB(op, err)
	}
	return nil
}

// decodeAll decodes an array of stored records, skipping (and reporting)
// corrupt ones. raw, when non-nil, receives each decoded record's stored
// object by id, so a rewrite keeps the fields a newer build added.
func (s *IDBStore) decodeAll(arr js.Value, raw map[string]js.Value) []Record {
	n := arr.Length()
	out := make([]Record, 0, n)
	for i := 0; i < n; i++ {
		v := arr.Index(i)
		r, err := decodeRecord(v)
		if err != nil {
			s.sawCorrupt(err)
			continue
		}
		if raw != nil {
			raw[r.ID] = v
		}
		out = append(out, r)
	}
	return out
}

// Enqueue implements Store: one readwrite transaction over records (and
// blobs when a payload is or was stored by reference). An append — the
// common case, and every record without an operation key — is a single put:
// PlanEnqueue ignores related records for Append and for a record without a
// key, so none are read, and the key generator assigns Seq in the put. The
// dedupe policies first read the same-key records (opKey index) and, for
// replace and merge, the entity's unsettled records (entity index), then
// their blob payloads.
func (s *IDBStore) Enqueue(ctx context.Context, req EnqueueRequest) (EnqueueResult, error) {
	const op = "enqueue"
	if err := ctx.Err(); err != nil {
		return EnqueueResult{}, err
	}
	in := &req.Record
	if in.ID == "" || in.UserID == "" {
		return EnqueueResult{}, ErrInvalidRecord
	}
	needKey := req.Policy.ReadsQueue(in.OperationKey)
	needEntity := needKey && (req.Policy.Dedupe == ReplaceLatest || req.Policy.Dedupe == Merge)
	withBlobs := needKey || !inlines(len(in.Payload), req.InlineLimit)
	var t *txn
	var err error
	if withBlobs {
		t, err = s.begin(op, "readwrite", storeRecords, storeBlobs)
	} else {
		t, err = s.begin(op, "readwrite", storeRecords)
	}
	if err != nil {
		return EnqueueResult{}, err
	}
	recs, err := t.store(storeRecords)
	if err != nil {
		return EnqueueResult{}, t.fail(op, err)
	}
	var blobs js.Value
	if withBlobs {
		if blobs, err = t.store(storeBlobs); err != nil {
			return EnqueueResult{}, t.fail(op, err)
		}
	}
	var raw map[string]js.Value
	var related []Record
	if needKey {
		var byKey, byEntity js.Value
		ix, err := t.call(recs, "index", jsName(indexOpKey))
		if err == nil {
			byKey, err = t.call(ix, "getAll", opKey(in.UserID, in.OperationKey))
		}
		if err != nil {
			return EnqueueResult{}, t.fail(op, err)
		}
		last := byKey
		if needEntity {
			ix, err := t.call(recs, "index", jsName(indexEntity))
			if err == nil {
				byEntity, err = t.call(ix, "getAll", in.EntityKey())
			}
			if err != nil {
				return EnqueueResult{}, t.fail(op, err)
			}
			last = byEntity
		}
		if err := t.wait(last); err != nil {
			return EnqueueResult{}, t.fail(op, err)
		}
		raw = map[string]js.Value{}
		seen := map[string]bool{}
		for _, rq := range [2]js.Value{byKey, byEntity} {
			if rq.IsUndefined() {
				continue
			}
			for _, r := range s.decodeAll(rq.Get("result"), raw) {
				if seen[r.ID] || r.UserID != in.UserID || r.Status.Settled() {
					continue
				}
				seen[r.ID] = true
				related = append(related, r)
			}
		}
		// Blob payloads of related records (merge needs the older one).
		var blobReqs []js.Value
		var blobIdx []int
		for i := range related {
			if related[i].PayloadRef != "" {
				r, err := t.call(blobs, "get", related[i].PayloadRef)
				if err != nil {
					return EnqueueResult{}, t.fail(op, err)
				}
				blobReqs = append(blobReqs, r)
				blobIdx = append(blobIdx, i)
			}
		}
		if len(blobReqs) > 0 {
			if err := t.wait(blobReqs[len(blobReqs)-1]); err != nil {
				return EnqueueResult{}, t.fail(op, err)
			}
			for j, r := range blobReqs {
				if v := r.Get("result"); !v.IsUndefined() {
					rd := &reader{store: storeBlobs, key: related[blobIdx[j]].PayloadRef}
					related[blobIdx[j]].Payload = rd.bytesOf("payload", v)
					if rd.err != nil {
						s.sawCorrupt(rd.err)
						return EnqueueResult{}, t.fail(op, rd.err)
					}
				}
			}
		}
	}
	plan, err := PlanEnqueue(related, req, in.CreatedAt)
	if err != nil {
		return EnqueueResult{}, t.abort(err)
	}
	if !plan.Write {
		t.release()
		return plan.Result, nil
	}
	if err := ctx.Err(); err != nil {
		return EnqueueResult{}, t.abort(err)
	}
	appended := plan.Result.Action == ActionAppended
	if appended {
		plan.Put.Seq = 0 // assigned by the key generator
	}
	var base js.Value
	if !appended {
		base = raw[plan.Put.ID]
	}
	put, err := writePlan(op, recs, blobs, withBlobs, &plan, base)
	if err != nil {
		return EnqueueResult{}, t.fail(op, err)
	}
	if err := hook(op, "written"); err != nil {
		return EnqueueResult{}, t.abort(err)
	}
	t.commit()
	if err := t.finish(); err != nil {
		return EnqueueResult{}, wrapIDB(op, err)
	}
	if appended {
		return appendedSeq(plan.Result, put.Get("result"))
	}
	return plan.Result, nil
}

// writePlan issues the writes of an enqueue plan: the blob delete and put,
// then the record's put (on top of base, the stored object it replaces, if
// any), whose request it returns.
func writePlan(op string, recs, blobs js.Value, withBlobs bool, plan *EnqueuePlan, base js.Value) (js.Value, error) {
	if plan.DeleteBlob != "" || plan.Put.PayloadRef != "" {
		if !withBlobs {
			return js.Undefined(), &IDBError{Op: op, Err: errors.New("blob write outside the transaction's scope")}
		}
		if plan.DeleteBlob != "" {
			if _, err := jsglue.Call(blobs, "delete", plan.DeleteBlob); err != nil {
				return js.Undefined(), err
			}
		}
		if plan.Put.PayloadRef != "" {
			if _, err := jsglue.Call(blobs, "put", bytesToJS(plan.Blob), plan.Put.PayloadRef); err != nil {
				return js.Undefined(), err
			}
		}
	}
	return jsglue.Call(recs, "put", encodeRecord(&plan.Put, base))
}

// appendedSeq completes the result of a committed append with the seq the
// key generator gave its record (k: its put request's result).
func appendedSeq(res EnqueueResult, k js.Value) (EnqueueResult, error) {
	if k.Type() != js.TypeNumber {
		return EnqueueResult{}, &IDBError{Op: "enqueue", Err: errors.New("key generator returned no number")}
	}
	res.Record.Seq = uint64(k.Float())
	return res, nil
}

// AppendTarget is where the loader's hook writes plain appends (see
// PlainAppend and UseLoader): the connection, the
// transaction's store names (the records store first) and options
// (durability), as Enqueue opens its transaction. ok is false once the
// store is closed. A transaction the builder opens after the connection
// closed throws, and the hook then leaves the operation to Enqueue,
// which returns the store's typed error.
func (s *IDBStore) AppendTarget() (db, names, opts js.Value, ok bool) {
	if s.Err() != nil {
		return db, names, opts, false
	}
	opts = js.Undefined()
	if s.durability != "" {
		opts = s.durOpts
	}
	return s.db, s.namesOf([]string{storeRecords}), opts, true
}

// EnqueueAborted is the error of an append whose transaction aborted, txErr
// the transaction's error (why IndexedDB aborted it: QuotaExceededError,
// ...; null when the page aborted it); it always matches ErrTxAborted.
// Nothing was written.
func EnqueueAborted(txErr js.Value) error {
	var cause error
	if txErr.Type() == js.TypeObject {
		cause = jsglue.FromJS(txErr)
	}
	return wrapIDB("enqueue", abortError(cause))
}

// getByID issues a lookup of record id through the unique id index.
func getByID(t *txn, recs js.Value, id string) (js.Value, error) {
	ix, err := t.call(recs, "index", indexID)
	if err != nil {
		return js.Undefined(), err
	}
	return t.call(ix, "get", id)
}

// readLease issues a get of lease row name (found=false when absent).
func readLease(t *txn, name string) (js.Value, error) {
	leases, err := t.store(storeLeases)
	if err != nil {
		return js.Undefined(), err
	}
	return t.call(leases, "get", name)
}

func leaseResult(r js.Value) (Lease, bool, error) {
	v := r.Get("result")
	if v.IsUndefined() {
		return Lease{}, false, nil
	}
	l, err := decodeLease(v)
	return l, err == nil, err
}

// Claim implements Store: the lease check, the non-acked records in seq
// order and the claim writes, in one transaction.
//
// The records are read a page at a time, only until the plan holds a full
// batch or the queue ends: the first page from the live index, the next ones
// from the store by seq (acked records skipped). A claim's cost so follows
// the batch and the blocked records ahead of it, not the queue's length —
// reading the whole queue for every batch made draining a long offline
// backlog quadratic. The plan is the one PlanClaim makes over the whole
// queue: the pages are a seq-ordered prefix of it, so every entity's earlier
// records are in them, and the status of a dependency beyond them is looked
// up by id (ClaimRequest.Beyond).
func (s *IDBStore) Claim(ctx context.Context, req ClaimRequest) ([]Record, error) {
	const op = "claim"
	t, err := s.beginCtx(ctx, op, "readwrite", storeRecords, storeLeases)
	if err != nil {
		return nil, err
	}
	lr, err := readLease(t, req.Lease.Name)
	if err != nil {
		return nil, t.fail(op, err)
	}
	recs, err := t.store(storeRecords)
	if err != nil {
		return nil, t.fail(op, err)
	}
	limit := max(req.Limit, 1)
	page := s.claimPage
	if page <= 0 {
		page = max(2*limit, 32)
	}
	ix, err := t.call(recs, "index", indexLive)
	var first js.Value
	if err == nil {
		first, err = t.call(ix, "getAll", keyRange().Call("only", 1), page)
	}
	if err != nil {
		return nil, t.fail(op, err)
	}
	if err := t.wait(first); err != nil {
		return nil, t.fail(op, err)
	}
	cur, found, err := leaseResult(lr)
	if err != nil {
		s.sawCorrupt(err)
		return nil, t.abort(err)
	}
	if !CurrentLease(cur, found, req.Lease) {
		return nil, t.abort(ErrStaleOwner)
	}
	raw := map[string]js.Value{}
	arr := first.Get("result")
	n := arr.Length()
	live := s.decodeAll(arr, raw)
	more, last := n == page, js.Undefined()
	if n > 0 {
		last = arr.Index(n - 1).Get("seq")
	}
	var beyond map[string]Status
	var plan ClaimPlan
	for {
		if more {
			if beyond, err = s.beyondDeps(t, recs, live, beyond); err != nil {
				return nil, t.fail(op, err)
			}
			req.Beyond = beyond
		} else {
			req.Beyond = nil // the whole queue was read: absent means not live
		}
		plan = PlanClaim(live, req)
		if !more || len(plan.Claimed) >= limit {
			break
		}
		next, err := t.call(recs, "getAll", keyRange().Call("lowerBound", last, true), page)
		if err == nil {
			err = t.wait(next)
		}
		if err != nil {
			return nil, t.fail(op, err)
		}
		arr = next.Get("result")
		n = arr.Length()
		for i := 0; i < n; i++ {
			v := arr.Index(i)
			if !v.Get(fieldLive).Equal(js.ValueOf(1)) {
				continue // acked (or not ours)
			}
			r, err := decodeRecord(v)
			if err != nil {
				s.sawCorrupt(err)
				continue
			}
			raw[r.ID] = v
			live = append(live, r)
		}
		more = n == page
		if n > 0 {
			last = arr.Index(n - 1).Get("seq")
		}
	}
	if len(plan.Put) == 0 {
		t.release()
		return plan.Claimed, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, t.abort(err)
	}
	for i := range plan.Put {
		if _, err := t.call(recs, "put", encodeRecord(&plan.Put[i], raw[plan.Put[i].ID])); err != nil {
			return nil, t.fail(op, err)
		}
	}
	if err := t.end(op); err != nil {
		return nil, err
	}
	return plan.Claimed, nil
}

// beyondDeps adds to known (returned, allocated when nil) the status of
// every live record that a record of read depends on and that read does not
// hold: it lies beyond the pages read. Each id is looked up once, by the id
// index; an id not found or not live is left out (absent counts as acked).
func (s *IDBStore) beyondDeps(t *txn, recs js.Value, read []Record, known map[string]Status) (map[string]Status, error) {
	var ids []string
	var in map[string]bool
	for i := range read {
		for _, d := range read[i].DependencyIDs {
			if in == nil {
				in = make(map[string]bool, len(read))
				for j := range read {
					in[read[j].ID] = true
				}
			}
			if _, done := known[d]; !done && !in[d] {
				ids = append(ids, d)
			}
		}
	}
	if len(ids) == 0 {
		return known, nil
	}
	if known == nil {
		known = map[string]Status{}
	}
	ix, err := t.call(recs, "index", indexID)
	if err != nil {
		return known, err
	}
	gets := make([]js.Value, len(ids))
	for i, id := range ids {
		if gets[i], err = t.call(ix, "get", id); err != nil {
			return known, err
		}
	}
	if err := t.wait(gets[len(gets)-1]); err != nil {
		return known, err
	}
	for i, id := range ids {
		v := gets[i].Get("result")
		if v.Type() != js.TypeObject || !v.Get(fieldLive).Equal(js.ValueOf(1)) {
			known[id] = StatusAcked // absent or acked: done
			continue
		}
		if st := v.Get("status"); st.Type() == js.TypeString {
			known[id] = Status(st.String())
		} else {
			known[id] = StatusPending // unreadable: not done
		}
	}
	return known, nil
}

// UpdateBatch implements Store: the lease row and every record read with
// requests issued together (only the last awaited), the Fns run in order in
// Go, then one put per changed record, one commit.
func (s *IDBStore) UpdateBatch(ctx context.Context, lease Lease, ups []RecordUpdate) ([]UpdateResult, error) {
	const op = "update batch"
	t, err := s.beginCtx(ctx, op, "readwrite", storeRecords, storeLeases)
	if err != nil {
		return nil, err
	}
	lr, err := readLease(t, lease.Name)
	if err != nil {
		return nil, t.fail(op, err)
	}
	recs, err := t.store(storeRecords)
	if err != nil {
		return nil, t.fail(op, err)
	}
	reads := make(map[string]js.Value, len(ups))
	last := lr
	for _, u := range ups {
		if _, ok := reads[u.ID]; ok {
			continue
		}
		rr, err := getByID(t, recs, u.ID)
		if err != nil {
			return nil, t.fail(op, err)
		}
		reads[u.ID], last = rr, rr
	}
	if err := t.wait(last); err != nil {
		return nil, t.fail(op, err)
	}
	cur, found, err := leaseResult(lr)
	if err != nil {
		s.sawCorrupt(err)
		return nil, t.abort(err)
	}
	if !CurrentLease(cur, found, lease) {
		return nil, t.abort(ErrStaleOwner)
	}
	type state struct {
		rec Record
		raw js.Value
		ok  bool
		err error // ErrNotFound, or why the stored record does not decode
	}
	states := make(map[string]*state, len(reads))
	for id, rr := range reads {
		st := &state{err: ErrNotFound}
		if v := rr.Get("result"); !v.IsUndefined() {
			r, err := decodeRecord(v)
			if err != nil {
				// A corrupt record is reported, never fatal to the others.
				s.sawCorrupt(err)
				st.err = err
			} else {
				st.rec, st.raw, st.ok = r, v, true
			}
		}
		states[id] = st
	}
	out := make([]UpdateResult, len(ups))
	dirty := map[string]bool{}
	for i, u := range ups {
		st := states[u.ID]
		switch {
		case !st.ok:
			out[i].Err = st.err
			continue
		case !u.Take && !holds(&st.rec, lease):
			out[i] = UpdateResult{Record: st.rec.Clone(), Err: ErrStaleOwner}
			continue
		}
		c := st.rec.Clone()
		if err := u.Fn(&c); err != nil {
			out[i] = UpdateResult{Record: st.rec.Clone(), Err: err}
			continue
		}
		if c.ID != u.ID || c.Seq != st.rec.Seq || (u.Take && !holds(&c, lease)) {
			out[i] = UpdateResult{Record: st.rec.Clone(), Err: &opError{op: op, detail: "fn changed the record id or seq, or a take did not lease it", err: ErrInvalidRecord}}
			continue
		}
		st.rec = c
		dirty[u.ID] = true
		out[i].Record = c.Clone()
	}
	if len(dirty) == 0 {
		t.release()
		return out, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, t.abort(err)
	}
	for _, u := range ups { // in batch order: deterministic
		if !dirty[u.ID] {
			continue
		}
		dirty[u.ID] = false
		st := states[u.ID]
		if _, err := t.call(recs, "put", encodeRecord(&st.rec, st.raw)); err != nil {
			return nil, t.fail(op, err)
		}
	}
	if err := t.end(op); err != nil {
		return nil, err
	}
	return out, nil
}

// Amend implements Store: one record changed by fn in one transaction,
// without a lease (fn itself refuses records that are in flight).
func (s *IDBStore) Amend(ctx context.Context, id string, fn func(*Record) error) (Record, error) {
	const op = "amend"
	t, err := s.beginCtx(ctx, op, "readwrite", storeRecords)
	if err != nil {
		return Record{}, err
	}
	recs, err := t.store(storeRecords)
	if err != nil {
		return Record{}, t.fail(op, err)
	}
	rr, err := getByID(t, recs, id)
	if err != nil {
		return Record{}, t.fail(op, err)
	}
	if err := t.wait(rr); err != nil {
		return Record{}, t.fail(op, err)
	}
	v := rr.Get("result")
	if v.IsUndefined() {
		return Record{}, t.abort(ErrNotFound)
	}
	r, err := decodeRecord(v)
	if err != nil {
		s.sawCorrupt(err)
		return Record{}, t.abort(err)
	}
	c := r.Clone()
	if err := fn(&c); err != nil {
		return r, t.abort(err)
	}
	if err := ctx.Err(); err != nil {
		return r, t.abort(err)
	}
	if c.ID != id || c.Seq != r.Seq {
		return r, t.abort(&opError{op: op, detail: "fn changed the record id or seq", err: ErrInvalidRecord})
	}
	if _, err := t.call(recs, "put", encodeRecord(&c, v)); err != nil {
		return r, t.fail(op, err)
	}
	if err := t.end(op); err != nil {
		return r, err
	}
	return c, nil
}

// Delete implements Store. Records go in Seq order, so a Limit deletes the
// oldest matches. Corrupt records never match.
func (s *IDBStore) Delete(ctx context.Context, f Filter) (int, error) {
	const op = "delete"
	t, err := s.beginCtx(ctx, op, "readwrite", storeRecords, storeBlobs)
	if err != nil {
		return 0, err
	}
	list, err := s.query(t, op, f)
	if err != nil {
		return 0, t.fail(op, err)
	}
	if len(list) == 0 {
		t.release()
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, t.abort(err)
	}
	recs, _ := t.store(storeRecords)
	blobs, err := t.store(storeBlobs)
	if err != nil {
		return 0, t.fail(op, err)
	}
	for i := range list {
		if list[i].PayloadRef != "" {
			if _, err := t.call(blobs, "delete", list[i].PayloadRef); err != nil {
				return 0, t.fail(op, err)
			}
		}
		if _, err := t.call(recs, "delete", float64(list[i].Seq)); err != nil {
			return 0, t.fail(op, err)
		}
	}
	if err := t.end(op); err != nil {
		return 0, err
	}
	return len(list), nil
}

// query reads the records matching f in Seq order (Limit applied). It
// narrows with an index where one fits: ids by key, statuses by the status
// index, a user by the user index; otherwise it reads the whole store, so
// that corrupt records of any shape are met and reported.
func (s *IDBStore) query(t *txn, op string, f Filter) ([]Record, error) {
	recs, err := t.store(storeRecords)
	if err != nil {
		return nil, err
	}
	var reqs []js.Value
	switch {
	case len(f.IDs) > 0:
		for _, id := range f.IDs {
			r, err := getByID(t, recs, id)
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, r)
		}
	case len(f.Statuses) > 0:
		ix, err := t.call(recs, "index", indexStatus)
		if err != nil {
			return nil, err
		}
		done := map[Status]bool{}
		for _, st := range f.Statuses {
			if done[st] {
				continue
			}
			done[st] = true
			r, err := t.call(ix, "getAll", string(st))
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, r)
		}
	case f.UserID != "":
		ix, err := t.call(recs, "index", indexUser)
		if err != nil {
			return nil, err
		}
		r, err := t.call(ix, "getAll", f.UserID)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, r)
	default:
		r, err := t.call(recs, "getAll")
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, r)
	}
	if err := t.wait(reqs[len(reqs)-1]); err != nil {
		return nil, err
	}
	var out []Record
	seen := map[string]bool{}
	for _, rq := range reqs {
		v := rq.Get("result")
		if v.IsUndefined() {
			continue
		}
		var got []Record
		if len(f.IDs) > 0 {
			r, err := decodeRecord(v)
			if err != nil {
				s.sawCorrupt(err)
				continue
			}
			got = []Record{r}
		} else {
			got = s.decodeAll(v, nil)
		}
		for i := range got {
			if !seen[got[i].ID] && f.Match(&got[i]) {
				seen[got[i].ID] = true
				out = append(out, got[i])
			}
		}
	}
	sortBySeq(out)
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// Get implements Store.
func (s *IDBStore) Get(ctx context.Context, id string) (Record, error) {
	const op = "get"
	t, err := s.beginCtx(ctx, op, "readonly", storeRecords)
	if err != nil {
		return Record{}, err
	}
	defer t.release()
	recs, err := t.store(storeRecords)
	if err != nil {
		return Record{}, wrapIDB(op, err)
	}
	r, err := getByID(t, recs, id)
	if err != nil {
		return Record{}, wrapIDB(op, err)
	}
	if err := t.wait(r); err != nil {
		return Record{}, wrapIDB(op, err)
	}
	v := r.Get("result")
	if v.IsUndefined() {
		return Record{}, ErrNotFound
	}
	rec, err := decodeRecord(v)
	if err != nil {
		s.sawCorrupt(err)
		return Record{}, err
	}
	return rec, nil
}

// List implements Store. Corrupt records are skipped and reported (Corrupt,
// WithOnCorrupt), never fatal.
func (s *IDBStore) List(ctx context.Context, f Filter) ([]Record, error) {
	const op = "list"
	t, err := s.beginCtx(ctx, op, "readonly", storeRecords)
	if err != nil {
		return nil, err
	}
	defer t.release()
	out, err := s.query(t, op, f)
	return out, wrapIDB(op, err)
}

// Payload implements Store.
func (s *IDBStore) Payload(ctx context.Context, ref string) ([]byte, error) {
	const op = "payload"
	t, err := s.beginCtx(ctx, op, "readonly", storeBlobs)
	if err != nil {
		return nil, err
	}
	defer t.release()
	blobs, err := t.store(storeBlobs)
	if err != nil {
		return nil, wrapIDB(op, err)
	}
	r, err := t.call(blobs, "get", ref)
	if err != nil {
		return nil, wrapIDB(op, err)
	}
	if err := t.wait(r); err != nil {
		return nil, wrapIDB(op, err)
	}
	v := r.Get("result")
	if v.IsUndefined() {
		return nil, ErrNotFound
	}
	rd := &reader{store: storeBlobs, key: ref}
	b := rd.bytesOf("payload", v)
	if rd.err != nil {
		s.sawCorrupt(rd.err)
		return nil, rd.err
	}
	return b, nil
}

// Status implements Store: counts by status and the oldest unsettled
// record from the status index, and the metadata, in one readonly
// transaction. It reads no record beyond the first of each waiting or
// in-flight status, so its cost does not grow with the queue: every tab
// reads it on every change, and a backlog of thousands of offline
// mutations must not make each read decode them all.
func (s *IDBStore) Status(ctx context.Context) (Projection, error) {
	return s.StatusSchema(ctx, SchemaGate{})
}

// projected are the statuses a Projection counts, in its field order.
var projected = []Status{StatusPending, StatusLeased, StatusSending, StatusFailed, StatusDeadLetter, StatusConflict, StatusTerminalFailed, StatusAcked}

// StatusSchema is Status that also counts the unsettled records gate leaves
// alone (Projection.Unsupported; none when gate.Version <= 0): a count of
// the records of another schema than gate's from the schema index, then
// (only when there are such records and unsettled ones) what gate decides
// of the fewer of the two sets (countUnsupported). Outbox.Status uses it
// instead of a scan.
func (s *IDBStore) StatusSchema(ctx context.Context, gate SchemaGate) (Projection, error) {
	const op = "status"
	t, err := s.beginCtx(ctx, op, "readonly", storeRecords, storeMeta)
	if err != nil {
		return Projection{}, err
	}
	defer t.release()
	// Requests of one transaction complete in order: issue them all (a
	// count, and for an unsettled status its first record, per status),
	// await the last.
	var counts, firsts [8]js.Value
	var recs, mr, newer, older, lastAck js.Value
	last, err := jsglue.Try(func() js.Value {
		recs = t.v.Call("objectStore", storeRecords)
		mr = t.v.Call("objectStore", storeMeta).Call("get", metaKey)
		sx := recs.Call("index", indexStatus)
		// The acked record of the highest seq (LastAckAt).
		lastAck = sx.Call("openCursor", keyRange().Call("only", string(StatusAcked)), "prev")
		last := lastAck
		for i, st := range projected {
			counts[i] = sx.Call("count", string(st))
			last = counts[i]
			if !st.Settled() {
				firsts[i] = sx.Call("get", string(st))
				last = firsts[i]
			}
		}
		if gate.Version > 0 {
			schemaIx := recs.Call("index", indexSchema)
			newer = schemaIx.Call("count", keyRange().Call("lowerBound", gate.Version, true))
			older = schemaIx.Call("count", keyRange().Call("upperBound", gate.Version, true))
			last = older
		}
		return last
	})
	if err == nil {
		err = t.wait(last)
	}
	if err != nil {
		return Projection{}, wrapIDB(op, err)
	}
	var p Projection
	if v := mr.Get("result"); !v.IsUndefined() {
		if p.Meta, err = decodeMeta(v); err != nil {
			s.sawCorrupt(err)
			return Projection{}, err
		}
	}
	var n [8]int
	for i := range counts {
		if v := counts[i].Get("result"); v.Type() == js.TypeNumber {
			n[i] = v.Int()
		}
		if firsts[i].IsUndefined() {
			continue
		}
		v := firsts[i].Get("result")
		if v.Type() != js.TypeObject {
			continue
		}
		rd := newReader(storeRecords, v)
		at := rd.time("createdAt")
		if rd.err != nil {
			s.sawCorrupt(rd.err)
			return Projection{}, rd.err
		}
		if p.OldestPendingAt.IsZero() || at.Before(p.OldestPendingAt) {
			p.OldestPendingAt = at
		}
	}
	// A hint for the watchdog, not data: an odd value is left out.
	if c := lastAck.Get("result"); c.Type() == js.TypeObject {
		if v := c.Get("value"); v.Type() == js.TypeObject {
			if ms := v.Get("ackedAt"); ms.Type() == js.TypeNumber && ms.Float() > 0 && ms.Float() < 8.64e15 {
				p.LastAckAt = time.UnixMilli(int64(ms.Float()))
			}
		}
	}
	p.Pending, p.Sending, p.Failed = n[0], n[1]+n[2], n[3]
	p.DeadLetter, p.Conflict, p.Terminal, p.Acked = n[4], n[5], n[6], n[7]
	if gate.Version <= 0 {
		return p, nil
	}
	unsettled := n[0] + n[1] + n[2] + n[3]
	if other := resultInt(newer) + resultInt(older); other > 0 && unsettled > 0 {
		if p.Unsupported, err = s.countUnsupported(t, recs, gate, unsettled, other); err != nil {
			return Projection{}, err
		}
	}
	return p, nil
}

func resultInt(req js.Value) int {
	if v := req.Get("result"); v.Type() == js.TypeNumber {
		return v.Int()
	}
	return 0
}

// countUnsupported counts, within t, the unsettled records gate leaves
// alone, reading whichever is fewer: the unsettled records (by the status
// index), or the records of another schema than gate's (both sides of
// gate.Version in the schema index, acked history included). After a
// schema bump the old schema's acked history only grows, the backlog is
// usually short; during a long offline spell the reverse.
func (s *IDBStore) countUnsupported(t *txn, recs js.Value, gate SchemaGate, unsettled, other int) (int, error) {
	const op = "status"
	var reqs []js.Value
	var last js.Value
	_, err := jsglue.Try(func() js.Value {
		if unsettled <= other {
			sx := recs.Call("index", indexStatus)
			for _, st := range projected {
				if !st.Settled() {
					last = sx.Call("getAll", string(st))
					reqs = append(reqs, last)
				}
			}
		} else {
			ix := recs.Call("index", indexSchema)
			reqs = append(reqs, ix.Call("getAll", keyRange().Call("lowerBound", gate.Version, true)))
			last = ix.Call("getAll", keyRange().Call("upperBound", gate.Version, true))
			reqs = append(reqs, last)
		}
		return last
	})
	if err == nil {
		err = t.wait(last)
	}
	if err != nil {
		return 0, wrapIDB(op, err)
	}
	n := 0
	for _, res := range reqs {
		arr := res.Get("result")
		for i, k := 0, arr.Length(); i < k; i++ {
			rd := newReader(storeRecords, arr.Index(i))
			rec := Record{Status: Status(rd.str("status")), PayloadSchemaVersion: rd.int("payloadSchemaVersion")}
			if rd.err == nil && !rec.Status.Settled() && gate.Action(&rec) == SchemaMigrate {
				// Only a failed migration's error can leave it alone.
				rec.LastError = rd.errorInfo("lastError")
			}
			if rd.err != nil {
				s.sawCorrupt(rd.err)
				return 0, rd.err
			}
			if gate.Unsupported(&rec) {
				n++
			}
		}
	}
	return n, nil
}

// keyRange is the page's IDBKeyRange.
func keyRange() js.Value { return js.Global().Get("IDBKeyRange") }

// GetLease implements Store.
func (s *IDBStore) GetLease(ctx context.Context, name string) (Lease, bool, error) {
	const op = "get lease"
	t, err := s.beginCtx(ctx, op, "readonly", storeLeases)
	if err != nil {
		return Lease{}, false, err
	}
	defer t.release()
	r, err := readLease(t, name)
	if err == nil {
		err = t.wait(r)
	}
	if err != nil {
		return Lease{}, false, wrapIDB(op, err)
	}
	l, found, err := leaseResult(r)
	if err != nil {
		s.sawCorrupt(err)
	}
	return l, found, err
}

// UpdateLease implements Store.
func (s *IDBStore) UpdateLease(ctx context.Context, name string, fn func(Lease, bool) (Lease, error)) (Lease, error) {
	const op = "update lease"
	t, err := s.beginCtx(ctx, op, "readwrite", storeLeases)
	if err != nil {
		return Lease{}, err
	}
	r, err := readLease(t, name)
	if err == nil {
		err = t.wait(r)
	}
	if err != nil {
		return Lease{}, t.fail(op, err)
	}
	base := r.Get("result")
	cur, found, err := leaseResult(r)
	if err != nil {
		s.sawCorrupt(err)
		return Lease{}, t.abort(err)
	}
	if !found {
		cur.Name = name
	}
	next, err := fn(cur, found)
	if err != nil {
		return cur, t.abort(err)
	}
	next.Name = name
	leases, err := t.store(storeLeases)
	if err == nil {
		_, err = t.call(leases, "put", encodeLease(next, base))
	}
	if err != nil {
		return cur, t.fail(op, err)
	}
	if err := t.end(op); err != nil {
		return cur, err
	}
	return next, nil
}

// UpdateMeta implements Store.
func (s *IDBStore) UpdateMeta(ctx context.Context, fn func(*Meta) error) (Meta, error) {
	const op = "update meta"
	t, err := s.beginCtx(ctx, op, "readwrite", storeMeta)
	if err != nil {
		return Meta{}, err
	}
	ms, err := t.store(storeMeta)
	var r js.Value
	if err == nil {
		r, err = t.call(ms, "get", metaKey)
	}
	if err == nil {
		err = t.wait(r)
	}
	if err != nil {
		return Meta{}, t.fail(op, err)
	}
	base := r.Get("result")
	var cur Meta
	if !base.IsUndefined() {
		if cur, err = decodeMeta(base); err != nil {
			s.sawCorrupt(err)
			return Meta{}, t.abort(err)
		}
	}
	m := cloneMeta(cur)
	if err := fn(&m); err != nil {
		return cur, t.abort(err)
	}
	if !base.IsUndefined() && metaEqual(cur, m) {
		// A read (the flusher reads the pause state this way): no write,
		// so no durable commit to wait for.
		t.release()
		return m, nil
	}
	if _, err := t.call(ms, "put", encodeMeta(m, base), metaKey); err != nil {
		return cur, t.fail(op, err)
	}
	if err := t.end(op); err != nil {
		return cur, err
	}
	return m, nil
}

func metaEqual(a, b Meta) bool {
	if a.Paused != b.Paused || !a.LastFlushAt.Equal(b.LastFlushAt) || len(a.AuthPaused) != len(b.AuthPaused) || !metaSessionEqual(&a, &b) {
		return false
	}
	for i := range a.AuthPaused {
		if a.AuthPaused[i] != b.AuthPaused[i] {
			return false
		}
	}
	if (a.LastError == nil) != (b.LastError == nil) {
		return false
	}
	return a.LastError == nil || (a.LastError.Code == b.LastError.Code && a.LastError.Message == b.LastError.Message &&
		a.LastError.Status == b.LastError.Status && a.LastError.At.Equal(b.LastError.At))
}
