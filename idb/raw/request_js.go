//go:build js && wasm

package raw

import (
	"context"
	"errors"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

// Request is one IndexedDB request. Issue it and either Await it, read it
// later with Result (IndexedDB completes a transaction's requests in the
// order they were issued, so once the last one has settled every earlier
// one has too), or never look at it: a request that fails aborts its
// transaction, so Tx.Await reports it.
type Request struct {
	tx    *Tx
	v     js.Value
	err   error // failed at once
	fail  error // why it failed later (read from the request, or a cursor function's panic)
	state uint8
	ch    chan struct{} // closed when the settling event arrived (awaited requests)
	each  func(Cursor) bool
}

const (
	stPending uint8 = iota
	stOK
	stFailed
)

// issue calls method on src (an IDBObjectStore, IDBIndex or IDBCursor) and
// wraps the request. A synchronous failure aborts the transaction.
func (t *Tx) issue(src js.Value, srcErr error, method string, args ...any) *Request {
	r := &Request{tx: t}
	if srcErr != nil {
		r.err = srcErr
	} else {
		r.v, r.err = call(src, method, args...)
	}
	if r.err != nil {
		r.state = stFailed
		t.failed(r.err)
	}
	return r
}

// JS returns the IDBRequest (undefined if it failed at once).
func (r *Request) JS() js.Value { return r.v }

// Err is the synchronous failure of issuing the request (DataError for a bad
// key, DataCloneError, TransactionInactiveError, NotFoundError for a store
// outside the scope), nil if it was issued. It does not wait.
func (r *Request) Err() error { return r.err }

// Await waits for the request and returns its result (undefined for
// requests without one, and for cursors), or its error: a *jsglue.JSError
// such as ConstraintError, or AbortError when its transaction was aborted
// before it ran. If ctx ends first it returns ctx.Err() at once (also for a
// ctx already ended); the request itself cannot be cancelled and still runs
// — abort the transaction for that.
//
// Await must not be called on the JavaScript event loop (in a cursor
// function or an upgrade): it would block it for good.
func (r *Request) Await(ctx context.Context) (js.Value, error) { return r.await(ctx, false) }

// AwaitFresh is Await for a request the caller issued and has not blocked
// since (no await, no channel, no lock in between): it cannot have settled
// unseen, so the check whether it did (a call into JavaScript) is skipped.
// idb's fenced transactions await that way. On any other request it may
// wait forever.
func (r *Request) AwaitFresh(ctx context.Context) (js.Value, error) { return r.await(ctx, true) }

// WaitFresh is AwaitFresh without reading the result: nil once the request
// settled (Result then has its outcome), or ctx's error if ctx ended first.
func (r *Request) WaitFresh(ctx context.Context) error { return r.wait(ctx, true) }

// await is Await; fresh is AwaitFresh's promise.
func (r *Request) await(ctx context.Context, fresh bool) (js.Value, error) {
	if err := r.wait(ctx, fresh); err != nil {
		return js.Undefined(), err
	}
	return r.outcome()
}

// wait is await up to the settling: it returns ctx's error if ctx ended
// first, else nil, and r's outcome is then ready (r.state).
func (r *Request) wait(ctx context.Context, fresh bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.state == stPending && r.ch == nil {
		// Not awaited yet: it may already have settled with no handler (an
		// earlier request awaited after a later one), in which case there is
		// nothing to wait for.
		if !fresh && r.v.Get("readyState").Equal(jsDone) {
			if e := r.v.Get("error"); e.Type() == js.TypeObject {
				r.state = stFailed
			} else {
				r.state = stOK
			}
			return nil
		}
		r.listen()
	}
	if r.state == stPending {
		if cd := ctx.Done(); cd == nil {
			<-r.ch
		} else {
			select {
			case <-r.ch:
			case <-cd:
				return ctx.Err()
			}
		}
	}
	return nil
}

// Result returns the outcome of a settled request without waiting, or
// ErrPending.
func (r *Request) Result() (js.Value, error) {
	if r.state != stPending {
		return r.outcome()
	}
	if r.each == nil && r.v.Get("readyState").Equal(jsDone) {
		return r.settled()
	}
	return js.Undefined(), ErrPending
}

// listen routes the request's success and error events to Go: two handler
// properties, the only per-request registration.
func (r *Request) listen() {
	r.ch = make(chan struct{})
	regMu.Lock()
	awaiting = append(awaiting, r)
	regMu.Unlock()
	r.v.Set("onsuccess", hSuccess)
	r.v.Set("onerror", hError)
}

// settled reads a request IndexedDB reports done, whose event Go never saw.
func (r *Request) settled() (js.Value, error) {
	if e := r.v.Get("error"); e.Type() == js.TypeObject {
		r.state = stFailed
	} else {
		r.state = stOK
	}
	return r.outcome()
}

// Wrap wraps request v, issued on t's transaction by a direct call (a
// store built on this layer that issues its own requests), so that it can
// be awaited like one issued here. A synchronous failure of that call is
// the caller's to handle.
func (t *Tx) Wrap(v js.Value) *Request { return &Request{tx: t, v: v} }

// AdoptRequest wraps request v of t whose success and error handlers
// JavaScript already set to the ones Handlers returns (idb's apply hook):
// it is awaited from the start, with no handler to set from Go. It must
// not have settled yet.
func (t *Tx) AdoptRequest(v js.Value) *Request {
	r := &Request{tx: t, v: v, ch: make(chan struct{})}
	regMu.Lock()
	awaiting = append(awaiting, r)
	regMu.Unlock()
	return r
}

func (r *Request) outcome() (js.Value, error) {
	if r.state == stFailed {
		if r.err != nil {
			return js.Undefined(), r.err
		}
		if r.fail == nil {
			r.fail = requestError(r.v)
		}
		return js.Undefined(), r.fail
	}
	if r.each != nil {
		return js.Undefined(), nil
	}
	return r.v.Get("result"), nil
}

func requestError(v js.Value) error {
	if e := v.Get("error"); e.Type() == js.TypeObject {
		return jsglue.FromJS(e)
	}
	return jsglue.NewJSError("UnknownError", "request failed without an error")
}

// ---- cursors ----

// Cursor is the current record of an iteration. It is valid only during the
// call of the function it was handed to.
type Cursor struct {
	v  js.Value
	tx *Tx
}

// Key is the record's key (the index key for an index cursor).
func (c Cursor) Key() js.Value { return c.v.Get("key") }

// PrimaryKey is the record's primary key.
func (c Cursor) PrimaryKey() js.Value { return c.v.Get("primaryKey") }

// Value is the record's value (undefined for a key cursor).
func (c Cursor) Value() js.Value { return c.v.Get("value") }

// Update replaces the record's value (readwrite transactions).
func (c Cursor) Update(value js.Value) *Request { return c.tx.issue(c.v, nil, "update", value) }

// Delete deletes the record (readwrite transactions).
func (c Cursor) Delete() *Request { return c.tx.issue(c.v, nil, "delete") }

// JS returns the IDBCursor.
func (c Cursor) JS() js.Value { return c.v }

var errCursorPanic = errors.New("idb: panic in cursor function")

// iterate opens a cursor whose records are handed to fn inside the success
// event: the iteration never leaves the event dispatch, so it costs one
// event per record and nothing else, and the transaction stays active.
func (t *Tx) iterate(src js.Value, srcErr error, method string, query js.Value, dir Direction, fn func(Cursor) bool) *Request {
	r := t.issue(src, srcErr, method, query, dir.js())
	if r.err != nil {
		return r
	}
	r.each = fn
	r.listen()
	return r
}

// step handles one success event of a cursor request: it reports whether
// the iteration is over (end reached, fn said stop, or failed).
func (r *Request) step() (over bool) {
	cur := r.v.Get("result")
	if cur.Type() != js.TypeObject {
		r.state = stOK // null: past the last record
		return true
	}
	cont, err := runEach(r.each, Cursor{v: cur, tx: r.tx})
	if err == nil && cont {
		if _, err = call(cur, "continue"); err == nil {
			return false
		}
	}
	if err != nil {
		r.fail, r.state = err, stFailed
		r.tx.failed(err)
		return true
	}
	r.state = stOK
	return true
}

func runEach(fn func(Cursor) bool, c Cursor) (cont bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errCursorPanic
		}
	}()
	return fn(c), nil
}

// Direction is a cursor's direction.
type Direction uint8

const (
	Next Direction = iota
	NextUnique
	Prev
	PrevUnique
)

func (d Direction) js() js.Value {
	if int(d) < len(jsDirections) {
		return jsDirections[d]
	}
	return jsDirections[0]
}

// ---- key ranges ----
//
// A query is a key, an IDBKeyRange, or js.Undefined() for every record.

// Only is the key range holding key alone.
func Only(key js.Value) (js.Value, error) { return call(jsKeyRange, "only", key) }

// LowerBound is every key above lower (or equal unless open).
func LowerBound(lower js.Value, open bool) (js.Value, error) {
	return call(jsKeyRange, "lowerBound", lower, open)
}

// UpperBound is every key below upper (or equal unless open).
func UpperBound(upper js.Value, open bool) (js.Value, error) {
	return call(jsKeyRange, "upperBound", upper, open)
}

// Bound is every key between lower and upper; lowerOpen/upperOpen exclude
// the bounds. A DataError if lower > upper.
func Bound(lower, upper js.Value, lowerOpen, upperOpen bool) (js.Value, error) {
	return call(jsKeyRange, "bound", lower, upper, lowerOpen, upperOpen)
}

// ---- stores and indexes ----

// src is what an object store and an index share: the reads and cursors
// below are the same calls on an IDBObjectStore and an IDBIndex (keys are
// the index's keys on an index, its records' primary keys on a store).
type src struct {
	v   js.Value
	tx  *Tx
	err error
}

// Store is an object store of a transaction.
type Store struct{ src }

// Index is an index of an object store of a transaction.
type Index struct{ src }

// JS returns the IDBObjectStore or IDBIndex.
func (s src) JS() js.Value { return s.v }

// Err is the failure of getting the store (NotFoundError: not in the
// transaction's scope) or the index; requests on it fail with it.
func (s src) Err() error { return s.err }

// Get reads the value of the first record matching query (undefined when
// absent).
func (s src) Get(query js.Value) *Request { return s.tx.issue(s.v, s.err, "get", query) }

// GetKey reads the primary key of the first record matching query.
func (s src) GetKey(query js.Value) *Request { return s.tx.issue(s.v, s.err, "getKey", query) }

// Count counts the records matching query.
func (s src) Count(query js.Value) *Request { return s.tx.issue(s.v, s.err, "count", query) }

// GetAll reads the values matching query, at most count (0: all), in key
// order, as a JavaScript array.
func (s src) GetAll(query js.Value, count int) *Request { return s.getAll("getAll", query, count) }

// GetAllKeys is GetAll for the primary keys.
func (s src) GetAllKeys(query js.Value, count int) *Request {
	return s.getAll("getAllKeys", query, count)
}

func (s src) getAll(method string, query js.Value, count int) *Request {
	if count > 0 {
		return s.tx.issue(s.v, s.err, method, query, count)
	}
	return s.tx.issue(s.v, s.err, method, query)
}

// OpenCursor calls fn with the key and value of each record matching query,
// in direction dir, until fn returns false or the records run out; Await the
// request for the end of the iteration. fn runs on the JavaScript event loop
// inside the cursor's success event: it must return at once and may issue
// requests of the same transaction, but never await anything.
func (s src) OpenCursor(query js.Value, dir Direction, fn func(key, value js.Value) bool) *Request {
	return s.tx.iterate(s.v, s.err, "openCursor", query, dir, func(c Cursor) bool { return fn(c.Key(), c.Value()) })
}

// Iterate is OpenCursor handing fn the Cursor itself: for the primary key,
// Update and Delete.
func (s src) Iterate(query js.Value, dir Direction, fn func(Cursor) bool) *Request {
	return s.tx.iterate(s.v, s.err, "openCursor", query, dir, fn)
}

// IterateKeys is Iterate over keys only (a key cursor: values are not read;
// PrimaryKey gives the record's key).
func (s src) IterateKeys(query js.Value, dir Direction, fn func(Cursor) bool) *Request {
	return s.tx.iterate(s.v, s.err, "openKeyCursor", query, dir, fn)
}

// KeyPath is the store's key path: null for out-of-line keys.
func (s Store) KeyPath() js.Value {
	if s.err != nil {
		return js.Null()
	}
	return s.v.Get("keyPath")
}

// Put writes value at key. Pass js.Undefined() as key for a store with a key
// path or a key generator.
func (s Store) Put(key, value js.Value) *Request {
	if key.IsUndefined() {
		return s.tx.issue(s.v, s.err, "put", value)
	}
	return s.tx.issue(s.v, s.err, "put", value, key)
}

// Add is Put that fails with ConstraintError (aborting the transaction) if
// the key exists.
func (s Store) Add(key, value js.Value) *Request {
	if key.IsUndefined() {
		return s.tx.issue(s.v, s.err, "add", value)
	}
	return s.tx.issue(s.v, s.err, "add", value, key)
}

// Delete deletes the records at query (a key or a range).
func (s Store) Delete(query js.Value) *Request { return s.tx.issue(s.v, s.err, "delete", query) }

// Clear deletes every record of the store.
func (s Store) Clear() *Request { return s.tx.issue(s.v, s.err, "clear") }

// Index returns the index name of the store.
func (s Store) Index(name string) Index {
	if s.err != nil {
		return Index{src{tx: s.tx, err: s.err}}
	}
	v, err := call(s.v, "index", jsString(name))
	return Index{src{v: v, tx: s.tx, err: err}}
}
