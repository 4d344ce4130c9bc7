//go:build js && wasm

package idb

import (
	"context"
	"errors"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/jsglue"
)

// ErrTxDone: a WriteTx was used after its writes function returned.
var ErrTxDone = errors.New("idb: write transaction already finished")

// ErrTransactionEnded: the transaction finished while the writes function
// ran, because it waited on something other than an IndexedDB request. The
// writes issued before the wait may have committed WITHOUT the fence: a bug
// in the caller, reported loudly. The error also matches the browser's own
// (TransactionInactiveError or InvalidStateError).
var ErrTransactionEnded = errors.New("idb: transaction ended inside writes (writes must only issue IndexedDB requests)")

func ended(err error) bool {
	return errors.Is(err, jsglue.ErrTransactionInactive) || errors.Is(err, jsglue.ErrInvalidState)
}

func (d *DB) begin(mode raw.Mode, scope js.Value) (*raw.Tx, error) {
	if err := d.Err(); err != nil {
		return nil, err
	}
	tx, err := raw.BeginScope(d.conn, scope, mode)
	if err != nil {
		if e := d.Err(); e != nil {
			return nil, e
		}
		return nil, err
	}
	return tx, nil
}

// AllocateToken allocates the next fencing token for resource: one
// readwrite transaction reads tf_epochs and writes the incremented epoch, so
// tokens are unique and strictly increasing across every tab of the origin.
// It satisfies locks.Fencer. Call it after winning leadership and before the
// leader acts.
func (d *DB) AllocateToken(ctx context.Context, resource, ownerID string) (uint64, error) {
	if resource == "" || len(resource) > MaxResourceLen || len(ownerID) > MaxOperationIDLen {
		return 0, ErrInvalidOp
	}
	if err := raw.Thawed(ctx); err != nil {
		return 0, err
	}
	key := raw.JSString(resource)
	if d.allocHook.Type() == js.TypeFunction && d.Err() == nil {
		if next, ok, err := d.allocHooked(ctx, resource, ownerID, key); ok {
			return next, err
		}
		// Not judged there: the same transaction in Go says why (closed,
		// corrupt, exhausted...).
	}
	tx, err := d.begin(raw.ReadWrite, d.scopeEpochs)
	if err != nil {
		return 0, err
	}
	st := tx.Store(StoreEpochs)
	v, err := st.Get(key).AwaitFresh(ctx)
	if err != nil {
		_ = tx.Abort()
		return 0, err
	}
	// Only the epoch is needed; the rest is validated without being copied.
	epoch, err := epochOf(v, resource, key)
	if err != nil {
		_ = tx.Abort()
		return 0, err
	}
	next, err := NextToken(epoch)
	if err != nil {
		_ = tx.Abort()
		return 0, err
	}
	rec := EpochRecord{Resource: resource, Epoch: next, OwnerID: ownerID, UpdatedAt: time.Now().UnixMilli()}
	if err := st.Put(key, d.encodeEpoch(rec, key, v)).Err(); err != nil {
		return 0, err // the failed request aborted the transaction
	}
	// Commit now rather than after the put's success event reaches an idle
	// event loop: one round trip less per token.
	_ = tx.Commit()
	if err := tx.Await(ctx); err != nil {
		return 0, err
	}
	return next, nil
}

// Epoch reads the allocation record of resource (zero if none).
func (d *DB) Epoch(ctx context.Context, resource string) (EpochRecord, error) {
	v, err := d.get(ctx, StoreEpochs, js.ValueOf(resource))
	if err != nil {
		return EpochRecord{}, err
	}
	return decodeEpoch(v, resource)
}

// Fence reads the receiver fence of resource (zero if none).
func (d *DB) Fence(ctx context.Context, resource string) (FenceRecord, error) {
	v, err := d.get(ctx, StoreFences, js.ValueOf(resource))
	if err != nil {
		return FenceRecord{}, err
	}
	return decodeFence(v, resource)
}

// Get reads one value of any store (undefined when absent), in its own
// readonly transaction: for loading state, not inside a fenced write.
func (d *DB) Get(ctx context.Context, store string, key js.Value) (js.Value, error) {
	return d.get(ctx, store, key)
}

func (d *DB) get(ctx context.Context, store string, key js.Value) (js.Value, error) {
	if err := raw.Thawed(ctx); err != nil {
		return js.Undefined(), err
	}
	tx, err := d.begin(raw.ReadOnly, raw.JSString(store))
	if err != nil {
		return js.Undefined(), err
	}
	// A readonly transaction commits nothing: its outcome is not awaited.
	return tx.Store(store).Get(key).AwaitFresh(ctx)
}

// WriteTx is the caller's view of a fenced transaction. Its methods issue
// IndexedDB requests in the same transaction as the fence update, so the
// writes and the fence commit together or not at all.
//
// The writes function handed to Apply may ONLY issue IndexedDB requests
// through this WriteTx. Waiting on anything else — a timer, a lock, fetch, a
// channel, another goroutine that waits — lets the transaction auto-commit
// or die (TransactionInactiveError), and the all-or-nothing guarantee is
// lost. Compute what to write before calling Apply.
type WriteTx struct {
	tx   *raw.Tx
	done bool
	cfg  *config // the database's: its own stores are writable
	// The last store used: writes usually go to one store, and getting it
	// again is a call into IndexedDB.
	lastName string
	last     raw.Store
	lastSet  bool
}

func (w *WriteTx) store(name string) (raw.Store, error) {
	if w.done {
		return raw.Store{}, ErrTxDone
	}
	if reserved(name) && (w.cfg == nil || !w.cfg.owns(name)) {
		return raw.Store{}, ErrReservedStore
	}
	if w.lastName != name || !w.lastSet {
		w.lastName, w.last, w.lastSet = name, w.tx.Store(name), true
	}
	return w.last, w.last.Err()
}

// Put writes value under key; pass js.Undefined() as key for a store with a
// key path. The request is not awaited (that is ~5x faster); if it fails,
// the whole transaction aborts and Apply returns the error.
func (w *WriteTx) Put(store string, key, value js.Value) error {
	st, err := w.store(store)
	if err != nil {
		return err
	}
	return st.Put(key, value).Err()
}

// Add is Put that fails (aborting the transaction) if the key exists.
func (w *WriteTx) Add(store string, key, value js.Value) error {
	st, err := w.store(store)
	if err != nil {
		return err
	}
	return st.Add(key, value).Err()
}

// Delete removes key from store.
func (w *WriteTx) Delete(store string, key js.Value) error {
	st, err := w.store(store)
	if err != nil {
		return err
	}
	return st.Delete(key).Err()
}

// Clear removes every record of store.
func (w *WriteTx) Clear(store string) error {
	st, err := w.store(store)
	if err != nil {
		return err
	}
	return st.Clear().Err()
}

// Get reads key from store inside the transaction (undefined when absent).
// It awaits an IndexedDB request, which keeps the transaction alive.
func (w *WriteTx) Get(store string, key js.Value) (js.Value, error) {
	st, err := w.store(store)
	if err != nil {
		return js.Undefined(), err
	}
	// Requests always settle (an aborted transaction fails them), so
	// Background cannot hang here.
	return st.Get(key).AwaitFresh(context.Background())
}

// Apply offers op to the receiver fence of op.Resource and, only if it is
// Accepted, runs writes and stores the advanced fence — all in ONE
// readwrite transaction over tf_epochs, tf_fences and stores (every app
// store when none are named). The decision (Decide) reads the resource's
// allocation record in that transaction too, so a token below the last one
// allocated is Stale from the moment the allocation committed, whether or
// not its owner has written yet. Stale and Duplicate write nothing and
// return a nil error. If writes returns an error, a request fails, or ctx
// ends before the commit, the transaction aborts: neither the fence nor the
// data change, and the error is returned. writes may be nil (fence only).
func (d *DB) Apply(ctx context.Context, op Op, writes func(tx *WriteTx) error, stores ...string) (Result, error) {
	if err := op.Validate(); err != nil {
		return 0, err
	}
	return d.fenced(ctx, op.Resource, op.Resource, stores, func(rec FenceRecord, allocated uint64) (Result, FenceRecord) {
		return Decide(rec, allocated, op, d.cfg.recentOps)
	}, writes, &op)
}

// CompareAndSwap writes value at key of store only if token is not older
// than the highest token that wrote that key ("write if token is fresh")
// nor than the last token allocated for resource (the token's resource;
// "" consults no allocation record), and then records token as the key's
// highest, in one transaction. An equal token may write again. It reports
// whether it wrote. The key's fence lives in tf_fences, apart from the
// resources of Apply.
func (d *DB) CompareAndSwap(ctx context.Context, resource, store, key string, token uint64, value js.Value) (bool, error) {
	if reserved(store) {
		return false, ErrReservedStore
	}
	if token == 0 || token > MaxToken || len(resource) > MaxResourceLen {
		return false, ErrInvalidOp
	}
	res, err := d.fenced(ctx, casResource(store, key), resource, []string{store}, func(rec FenceRecord, allocated uint64) (Result, FenceRecord) {
		if !DecideCAS(rec.Highest, allocated, token) {
			return Stale, rec
		}
		return Accepted, FenceRecord{Resource: rec.Resource, Highest: token}
	}, func(tx *WriteTx) error {
		st, err := tx.store(store)
		if err != nil {
			return err
		}
		k := js.ValueOf(key)
		if kp := st.KeyPath(); !kp.IsNull() && !kp.IsUndefined() {
			k = js.Undefined()
		}
		return tx.Put(store, k, value)
	}, nil)
	return res == Accepted, err
}

// scope returns the transaction scope of a fenced write: tf_epochs,
// tf_fences and stores (every app store when nil).
func (d *DB) scope(stores []string) (js.Value, error) {
	if stores == nil {
		return d.scopeAll, nil
	}
	for _, s := range stores {
		if reserved(s) && !d.cfg.owns(s) {
			return js.Undefined(), ErrReservedStore
		}
	}
	all := make([]string, 0, len(stores)+2)
	return raw.ScopeOf(append(append(all, StoreEpochs, StoreFences), stores...)), nil
}

// fenceRead is a fenced write under way: its transaction, the reads of the
// fence record and of the allocation record, and then the verdict.
type fenceRead struct {
	tx     *raw.Tx
	get    *raw.Request // the fence record
	epoch  *raw.Request // the allocation record; nil when none is consulted
	fences raw.Store    // zero on the hook's path until Go reads the record itself
	fast   bool         // the loader's apply hook opened the transaction
	id     int32        // and knows it by this id (JudgeFenceExported)

	resource, epochRes string
	decide             func(FenceRecord, uint64) (Result, FenceRecord)
	judged             bool   // JudgeFenceExported judged the records:
	res                Result // its verdict,
	err                error  // or the records' error

	prepared bool        // Accepted on the hook's path: the advanced fence waits in tfFin
	next     FenceRecord // Accepted on Go's path: the record to store,
	stored   js.Value    // over the stored one
}

// fenced runs a fenced write: read the fence of resource and the allocation
// record of epochRes ("" for none), decide, and when accepted run writes
// and store the advanced fence, in one transaction. op, for Apply, lets
// the loader's apply hook open its transaction (fast.js).
func (d *DB) fenced(ctx context.Context, resource, epochRes string, stores []string,
	decide func(FenceRecord, uint64) (Result, FenceRecord), writes func(*WriteTx) error, op *Op) (Result, error) {
	if err := raw.Thawed(ctx); err != nil {
		return 0, err
	}
	scope, err := d.scope(stores)
	if err != nil {
		return 0, err
	}
	key := raw.JSString(resource)
	r, err := d.readFence(scope, key, resource, epochRes, decide, op)
	if err != nil {
		return 0, err
	}
	tx := r.tx
	res, err := r.verdict(ctx, key)
	if err != nil {
		_ = tx.Abort()
		return 0, err
	}
	if res != Accepted {
		_ = tx.Abort() // nothing to write; aborting skips a durable commit
		return res, nil
	}
	if writes != nil {
		w := &WriteTx{tx: tx, cfg: &d.cfg}
		err := callWrites(writes, w)
		w.done = true
		if err != nil {
			return 0, d.writesFailed(tx, err)
		}
	}
	// The fence is written last, after the caller's writes: if they broke
	// the rule and the transaction committed early, the fence has not
	// moved (the operation is not marked applied without its data).
	if r.prepared {
		_, err = jsglue.Call(r.get.JS(), "tfFin") // put, then commit
	} else if err = r.fences.Put(key, encodeFence(r.next, key, r.stored)).Err(); err == nil {
		_ = tx.Commit()
	} // else the failed request aborted the transaction
	if err != nil {
		if ended(err) {
			return 0, errors.Join(ErrTransactionEnded, err)
		}
		return 0, err
	}
	if err := tx.Await(ctx); err != nil {
		return 0, err
	}
	return Accepted, nil
}

// readFence opens a fenced write's transaction and issues its two reads:
// through the loader's apply hook for Apply when it can, else from Go.
func (d *DB) readFence(scope, key js.Value, resource, epochRes string,
	decide func(FenceRecord, uint64) (Result, FenceRecord), op *Op) (*fenceRead, error) {
	r := &fenceRead{resource: resource, epochRes: epochRes, decide: decide}
	if op != nil && d.applyHook.Type() == js.TypeFunction && d.Err() == nil {
		r.id = hook(r)
		if v := d.applyHook.Invoke(scope, key, r.id); v.Type() == js.TypeObject {
			r.tx = raw.AdoptTx(v)
			r.get, r.fast = r.tx.AdoptRequest(v.Get("tfGet")), true
			return r, nil
		}
		unhook(r.id)
		// Undefined: no exports, or db.transaction threw, and begin below
		// says why.
	}
	tx, err := d.begin(raw.ReadWrite, scope)
	if err != nil {
		return nil, err
	}
	r.tx = tx
	// The allocation record first: requests complete in the order they
	// were issued, so once the fence's read settled, this one has too.
	if epochRes != "" {
		r.epoch = tx.Store(StoreEpochs).Get(raw.JSString(epochRes))
	}
	r.fences = tx.Store(StoreFences)
	r.get = r.fences.Get(key)
	return r, nil
}

// verdict waits for the reads and decides. For Accepted it leaves in r
// what to store: prepared (the hook holds it), or next over stored.
func (r *fenceRead) verdict(ctx context.Context, key js.Value) (Result, error) {
	if r.fast {
		defer unhook(r.id)
	}
	if err := r.get.WaitFresh(ctx); err != nil {
		return 0, err
	}
	if r.fast {
		if r.judged {
			return r.res, r.err
		}
		// Records the hook could not hand over: Go reads them here, in
		// the same transaction.
		r.fences = r.tx.Store(StoreFences)
		r.epoch = r.tx.Wrap(r.tx.JS().Get("tfEg"))
	}
	allocated, err := r.allocated()
	if err != nil {
		return 0, err
	}
	v, err := r.get.Result()
	if err != nil {
		return 0, err
	}
	rec, err := decodeFenceKey(v, r.resource, key)
	if err != nil {
		return 0, err
	}
	res, next := r.decide(rec, allocated)
	r.next, r.stored = next, v
	return res, nil
}

// allocated is the epoch of the allocation record read in the transaction
// (0 when there is none, or none was consulted).
func (r *fenceRead) allocated() (uint64, error) {
	if r.epochRes == "" {
		return 0, nil
	}
	v, err := r.epoch.Result()
	if err != nil {
		return 0, err
	}
	return epochOf(v, r.epochRes, raw.JSString(r.epochRes))
}

// writesFailed aborts the transaction after the caller's writes failed and
// says what happened: the caller's error, or ErrTransactionEnded with it if
// the transaction had already ended on its own — the writes waited on
// something else, and what they issued before may have committed without
// the fence.
func (d *DB) writesFailed(tx *raw.Tx, err error) error {
	if ended(err) {
		return errors.Join(ErrTransactionEnded, err)
	}
	if tx.Abort() == nil {
		return err
	}
	// Abort refused: the transaction is committing or finished. Its outcome
	// is on its way; a commit means the writes escaped the fence.
	<-tx.Done()
	if tx.Committed() {
		return errors.Join(ErrTransactionEnded, err)
	}
	return err
}

// callWrites runs the caller's writes, turning a panic into an error so the
// transaction is aborted rather than committed half-written.
func callWrites(writes func(*WriteTx) error, w *WriteTx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("idb: panic in writes")
		}
	}()
	return writes(w)
}
