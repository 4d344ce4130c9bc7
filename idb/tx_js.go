//go:build js && wasm

package idb

import (
	"context"
	"errors"
	"math"
	"strings"
	"syscall/js"
	"time"

	goidb "github.com/hack-pad/go-indexeddb/idb"
	"github.com/hack-pad/safejs"
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

func (d *DB) begin(mode goidb.TransactionMode, stores ...string) (*goidb.Transaction, error) {
	if err := d.Err(); err != nil {
		return nil, err
	}
	tx, err := d.db.Transaction(mode, stores[0], stores[1:]...)
	if err != nil {
		if e := d.Err(); e != nil {
			return nil, e
		}
		return nil, mapErr(err)
	}
	return tx, nil
}

// await waits for one request. Requests always settle (an aborted
// transaction fails them), so Background is safe here, and go-indexeddb
// answers (undefined, nil) to a cancelled ctx.
func await(r *goidb.Request) (js.Value, error) {
	v, err := r.Await(context.Background())
	return v, mapErr(err)
}

// commit waits for tx to finish. go-indexeddb's Transaction.Await can hang
// on a cancelled ctx, so it gets Background and ctx is watched here: on
// cancellation the transaction is aborted, unless it already committed.
func commit(ctx context.Context, tx *goidb.Transaction) error {
	ch := make(chan error, 1)
	go func() { ch <- tx.Await(context.Background()) }()
	select {
	case err := <-ch:
		return mapErr(err)
	case <-ctx.Done():
		_ = tx.Abort()
		if err := <-ch; err == nil {
			return nil // committed before the abort reached it
		}
		return ctx.Err()
	}
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
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	tx, err := d.begin(goidb.TransactionReadWrite, StoreEpochs)
	if err != nil {
		return 0, err
	}
	st, err := tx.ObjectStore(StoreEpochs)
	if err != nil {
		return 0, mapErr(err)
	}
	key := js.ValueOf(resource)
	req, err := st.Get(key)
	if err != nil {
		_ = tx.Abort()
		return 0, mapErr(err)
	}
	v, err := await(req)
	if err != nil {
		return 0, err
	}
	rec, err := decodeEpoch(v, resource)
	if err != nil {
		_ = tx.Abort()
		return 0, err
	}
	next, err := NextToken(rec.Epoch)
	if err != nil {
		_ = tx.Abort()
		return 0, err
	}
	rec = EpochRecord{Resource: resource, Epoch: next, OwnerID: ownerID, UpdatedAt: time.Now().UnixMilli()}
	if _, err := st.PutKey(key, encodeEpoch(rec)); err != nil {
		_ = tx.Abort()
		return 0, mapErr(err)
	}
	if err := commit(ctx, tx); err != nil {
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
	if err := ctx.Err(); err != nil {
		return js.Undefined(), err
	}
	tx, err := d.begin(goidb.TransactionReadOnly, store)
	if err != nil {
		return js.Undefined(), err
	}
	st, err := tx.ObjectStore(store)
	if err != nil {
		return js.Undefined(), mapErr(err)
	}
	req, err := st.Get(key)
	if err != nil {
		return js.Undefined(), mapErr(err)
	}
	return await(req)
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
	tx   *goidb.Transaction
	done bool
}

func (w *WriteTx) store(name string) (*goidb.ObjectStore, error) {
	if w.done {
		return nil, ErrTxDone
	}
	if reserved(name) {
		return nil, ErrReservedStore
	}
	st, err := w.tx.ObjectStore(name)
	return st, mapErr(err)
}

// Put writes value under key; pass js.Undefined() as key for a store with a
// key path. The request is not awaited (that is ~5x faster); if it fails,
// the whole transaction aborts and Apply returns the error.
func (w *WriteTx) Put(store string, key, value js.Value) error {
	st, err := w.store(store)
	if err != nil {
		return err
	}
	if key.IsUndefined() {
		_, err = st.Put(value)
	} else {
		_, err = st.PutKey(key, value)
	}
	return mapErr(err)
}

// Add is Put that fails (aborting the transaction) if the key exists.
func (w *WriteTx) Add(store string, key, value js.Value) error {
	st, err := w.store(store)
	if err != nil {
		return err
	}
	if key.IsUndefined() {
		_, err = st.Add(value)
	} else {
		_, err = st.AddKey(key, value)
	}
	return mapErr(err)
}

// Delete removes key from store.
func (w *WriteTx) Delete(store string, key js.Value) error {
	st, err := w.store(store)
	if err != nil {
		return err
	}
	_, err = st.Delete(key)
	return mapErr(err)
}

// Get reads key from store inside the transaction (undefined when absent).
// It awaits an IndexedDB request, which keeps the transaction alive.
func (w *WriteTx) Get(store string, key js.Value) (js.Value, error) {
	st, err := w.store(store)
	if err != nil {
		return js.Undefined(), err
	}
	req, err := st.Get(key)
	if err != nil {
		return js.Undefined(), mapErr(err)
	}
	return await(req)
}

// Apply offers op to the receiver fence of op.Resource and, only if it is
// Accepted, runs writes and stores the advanced fence — all in ONE
// readwrite transaction over tf_fences and stores (every app store when
// none are named). Stale and Duplicate write nothing and return a nil
// error. If writes returns an error, a request fails, or ctx ends before
// the commit, the transaction aborts: neither the fence nor the data change,
// and the error is returned. writes may be nil (fence only).
func (d *DB) Apply(ctx context.Context, op Op, writes func(tx *WriteTx) error, stores ...string) (Result, error) {
	if err := op.Validate(); err != nil {
		return 0, err
	}
	return d.fenced(ctx, op.Resource, stores, func(rec FenceRecord) (Result, FenceRecord) {
		return Decide(rec, op, d.cfg.recentOps)
	}, writes)
}

// CompareAndSwap writes value at key of store only if token is not older
// than the highest token that wrote that key ("write if token is fresh"),
// and then records token as the key's highest, in one transaction. An equal
// token may write again. It reports whether it wrote. The key's fence lives
// in tf_fences, apart from the resources of Apply.
func (d *DB) CompareAndSwap(ctx context.Context, store, key string, token uint64, value js.Value) (bool, error) {
	if reserved(store) {
		return false, ErrReservedStore
	}
	if token == 0 || token > MaxToken {
		return false, ErrInvalidOp
	}
	res, err := d.fenced(ctx, casResource(store, key), []string{store}, func(rec FenceRecord) (Result, FenceRecord) {
		if !DecideCAS(rec.Highest, token) {
			return Stale, rec
		}
		return Accepted, FenceRecord{Resource: rec.Resource, Highest: token}
	}, func(tx *WriteTx) error {
		st, err := tx.store(store)
		if err != nil {
			return err
		}
		k := js.ValueOf(key)
		if kp, err := st.KeyPath(); err == nil && !kp.IsNull() && !kp.IsUndefined() {
			k = js.Undefined()
		}
		return tx.Put(store, k, value)
	})
	return res == Accepted, err
}

func (d *DB) appStores() ([]string, error) {
	names, err := d.db.ObjectStoreNames()
	if err != nil {
		return nil, mapErr(err)
	}
	out := names[:0]
	for _, n := range names {
		if !reserved(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func (d *DB) fenced(ctx context.Context, resource string, stores []string,
	decide func(FenceRecord) (Result, FenceRecord), writes func(*WriteTx) error) (Result, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if stores == nil {
		var err error
		if stores, err = d.appStores(); err != nil {
			return 0, err
		}
	}
	for _, s := range stores {
		if reserved(s) {
			return 0, ErrReservedStore
		}
	}
	tx, err := d.begin(goidb.TransactionReadWrite, append([]string{StoreFences}, stores...)...)
	if err != nil {
		return 0, err
	}
	fail := func(err error) (Result, error) {
		_ = tx.Abort()
		return 0, err
	}
	fences, err := tx.ObjectStore(StoreFences)
	if err != nil {
		return fail(mapErr(err))
	}
	key := js.ValueOf(resource)
	req, err := fences.Get(key)
	if err != nil {
		return fail(mapErr(err))
	}
	v, err := await(req)
	if err != nil {
		return fail(err)
	}
	rec, err := decodeFence(v, resource)
	if err != nil {
		return fail(err)
	}
	res, next := decide(rec)
	if res != Accepted {
		_ = tx.Abort() // nothing to write; aborting skips a durable commit
		return res, nil
	}
	if writes != nil {
		w := &WriteTx{tx: tx}
		err := callWrites(writes, w)
		w.done = true
		if err != nil {
			if ended(err) || ended(mapErr(tx.Abort())) {
				return 0, errors.Join(ErrTransactionEnded, err)
			}
			return 0, err
		}
	}
	if _, err := fences.PutKey(key, encodeFence(next)); err != nil {
		if err = mapErr(err); ended(err) {
			return 0, errors.Join(ErrTransactionEnded, err)
		}
		return fail(err)
	}
	if err := commit(ctx, tx); err != nil {
		return 0, err
	}
	return Accepted, nil
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

// ---- records ----
//
// Records are plain objects under out-of-line keys, so anything a foreign
// script stores under our keys can be read back — and is checked field by
// field through safejs: a wrong type is a CorruptError, never a panic.

func encodeEpoch(r EpochRecord) js.Value {
	return js.ValueOf(map[string]any{
		"resource":  r.Resource,
		"epoch":     float64(r.Epoch),
		"ownerId":   r.OwnerID,
		"updatedAt": float64(r.UpdatedAt),
	})
}

func encodeFence(r FenceRecord) js.Value {
	return js.ValueOf(map[string]any{
		"resource":   r.Resource,
		"highest":    float64(r.Highest),
		"highestSeq": float64(r.HighestSeq),
		"recent":     strings.Join(r.Recent, "\n"),
	})
}

var jsObject = safejs.Safe(js.Global().Get("Object"))

type decoder struct {
	store, key string
}

func (d decoder) corrupt(reason string) error {
	return &CorruptError{Store: d.store, Key: d.key, Reason: reason}
}

func (d decoder) field(v safejs.Value, name string) (safejs.Value, error) {
	f, err := v.Get(name)
	if err != nil {
		return f, d.corrupt(name + ": unreadable")
	}
	return f, nil
}

func (d decoder) uint(v safejs.Value, name string) (uint64, error) {
	f, err := d.field(v, name)
	if err != nil {
		return 0, err
	}
	if f.Type() != safejs.TypeNumber {
		return 0, d.corrupt(name + ": not a number")
	}
	x, err := f.Float()
	if err != nil || math.IsNaN(x) || x < 0 || x > MaxToken || x != math.Trunc(x) {
		return 0, d.corrupt(name + ": not an integer in 0..2^53-1")
	}
	return uint64(x), nil
}

func (d decoder) str(v safejs.Value, name string, maxLen int) (string, error) {
	f, err := d.field(v, name)
	if err != nil {
		return "", err
	}
	if f.Type() != safejs.TypeString {
		return "", d.corrupt(name + ": not a string")
	}
	// Check the length before copying: a foreign record may hold a huge string.
	// Object(s) wraps the primitive without copying it, and has a length.
	if n, err := jsObject.Invoke(f); err != nil {
		return "", d.corrupt(name + ": unreadable")
	} else if n, err = n.Get("length"); err != nil || n.Type() != safejs.TypeNumber {
		return "", d.corrupt(name + ": unreadable")
	} else if l, err := n.Float(); err != nil || l > float64(maxLen) {
		return "", d.corrupt(name + ": too long")
	}
	s, err := f.String()
	if err != nil {
		return "", d.corrupt(name + ": unreadable")
	}
	return s, nil
}

func (d decoder) object(v safejs.Value) error {
	if v.Type() != safejs.TypeObject { // null has its own type
		return d.corrupt("not an object")
	}
	return nil
}

func decodeEpoch(jv js.Value, resource string) (EpochRecord, error) {
	if jv.IsUndefined() {
		return EpochRecord{Resource: resource}, nil
	}
	d := decoder{StoreEpochs, resource}
	v := safejs.Safe(jv)
	if err := d.object(v); err != nil {
		return EpochRecord{}, err
	}
	var r EpochRecord
	var err error
	if r.Resource, err = d.str(v, "resource", MaxResourceLen); err != nil {
		return EpochRecord{}, err
	}
	if r.Resource != resource {
		return EpochRecord{}, d.corrupt("resource: does not match its key")
	}
	if r.Epoch, err = d.uint(v, "epoch"); err != nil {
		return EpochRecord{}, err
	}
	if r.OwnerID, err = d.str(v, "ownerId", MaxOperationIDLen); err != nil {
		return EpochRecord{}, err
	}
	ts, err := d.uint(v, "updatedAt")
	if err != nil {
		return EpochRecord{}, err
	}
	r.UpdatedAt = int64(ts)
	return r, nil
}

func decodeFence(jv js.Value, resource string) (FenceRecord, error) {
	if jv.IsUndefined() {
		return FenceRecord{Resource: resource}, nil
	}
	d := decoder{StoreFences, resource}
	v := safejs.Safe(jv)
	if err := d.object(v); err != nil {
		return FenceRecord{}, err
	}
	var r FenceRecord
	var err error
	if r.Resource, err = d.str(v, "resource", len(resource)); err != nil {
		return FenceRecord{}, err
	}
	if r.Resource != resource {
		return FenceRecord{}, d.corrupt("resource: does not match its key")
	}
	if r.Highest, err = d.uint(v, "highest"); err != nil {
		return FenceRecord{}, err
	}
	if r.HighestSeq, err = d.uint(v, "highestSeq"); err != nil {
		return FenceRecord{}, err
	}
	recent, err := d.str(v, "recent", maxRecentLen)
	if err != nil {
		return FenceRecord{}, err
	}
	if recent != "" {
		r.Recent = strings.Split(recent, "\n")
		for _, id := range r.Recent {
			if id == "" || len(id) > MaxOperationIDLen || hasControl(id) {
				return FenceRecord{}, d.corrupt("recent: not a list of operation IDs")
			}
		}
	}
	return r, nil
}
