//go:build js && wasm

package idbstore

import (
	"context"
	"errors"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
)

// txn is one raw IndexedDB transaction driven from Go.
//
// Why not go-indexeddb's Transaction and Request here: v0.3.2 has no getAll,
// creates two js.Funcs and two goroutines per awaited request and three per
// awaited transaction, and its Transaction.Await can hang on a cancelled
// context. The store's hot path instead issues every request of a phase
// without awaiting it, awaits only the LAST one (IndexedDB completes the
// requests of a transaction in the order they were issued, so the earlier
// results are ready then), and awaits the transaction's complete/abort event
// once. One jsglue callback serves the whole transaction.
//
// Nothing but pure Go runs between the requests of a txn: no timer, lock,
// channel or fetch, so the transaction never goes inactive mid-way.
type txn struct {
	s          *IDBStore
	v          js.Value
	cb         *jsglue.Callback
	reqOK      js.Value
	reqErr     js.Value
	onComplete js.Value
	onAbort    js.Value
	req        chan error // result of the one awaited request
	done       chan error // complete (nil) or abort (cause)
	// aborting is the error the store aborted with itself (tx.error is null
	// then), so finish reports why.
	aborting error
	ended    bool
}

const (
	evReqOK = iota
	evReqErr
	evComplete
	evAbort
)

// begin opens a transaction on stores. mode is "readonly" or "readwrite".
// Only Enqueue's transaction carries the configured durability hint (see
// OpenIDBStore).
// beginCtx is begin once ctx is checked: a call whose context has ended
// opens no transaction.
func (s *IDBStore) beginCtx(ctx context.Context, op, mode string, stores ...string) (*txn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.begin(op, mode, stores...)
}

func (s *IDBStore) begin(op, mode string, stores ...string) (*txn, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	names := s.namesOf(stores)
	var v js.Value
	var err error
	if mode == "readwrite" && op == "enqueue" && s.durability != "" {
		v, err = jsglue.Call(s.db, "transaction", names, jsName(mode), s.durOpts)
	} else {
		v, err = jsglue.Call(s.db, "transaction", names, jsName(mode))
	}
	if err != nil {
		return nil, s.notOpened(op, err)
	}
	t := s.getTxn()
	t.v = v
	v.Set("oncomplete", t.onComplete)
	v.Set("onabort", t.onAbort)
	return t, nil
}

// notOpened is the error of op when IndexedDB refused to open its
// transaction or to issue its requests there and then (err): the store's
// own error once it is shut, or an IDBError.
func (s *IDBStore) notOpened(op string, err error) error {
	if cerr := s.Err(); cerr != nil {
		return cerr
	}
	if errors.Is(err, jsglue.ErrInvalidState) {
		// The connection is closing (versionchange, or the browser
		// closed it): the store is unusable from now on.
		s.shut(outbox.ErrStoreClosed)
		return s.Err()
	}
	return &IDBError{Op: op, Err: err}
}

// jsNames holds the constant strings the store passes to IndexedDB (modes,
// store and index names) as JavaScript strings made once: syscall/js turns
// every Go string argument into a new JavaScript string and a reference it
// tracks with a finalizer, which costs more than the call itself when the
// Go heap holds many (a finalizer's insertion walks its span's list).
var jsNames = func() map[string]js.Value {
	m := map[string]js.Value{}
	for _, s := range []string{"readonly", "readwrite", storeRecords, storeBlobs, storeLeases, storeMeta,
		indexID, indexLive, indexOpKey, indexEntity, indexStatus, indexUser} {
		m[s] = js.ValueOf(s)
	}
	return m
}()

// jsName returns s as its cached JavaScript string, or s itself.
func jsName(s string) any {
	if v, ok := jsNames[s]; ok {
		return v
	}
	return s
}

// namesOf returns a JavaScript array of store names, cached per set: the
// same few sets are used by every call.
func (s *IDBStore) namesOf(stores []string) js.Value {
	key := ""
	for _, n := range stores {
		key += n + "\x00"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.names[key]; ok {
		return a
	}
	a := js.Global().Get("Array").New(len(stores))
	for i, n := range stores {
		a.SetIndex(i, n)
	}
	s.names[key] = a
	return a
}

// getTxn takes a txn (with its callback already bound) from the pool.
// Only txns whose transaction finished (complete or abort observed) return
// to the pool, so no late event of an earlier transaction can reach a
// reused one.
func (s *IDBStore) getTxn() *txn {
	s.mu.Lock()
	if n := len(s.pool); n > 0 {
		t := s.pool[n-1]
		s.pool = s.pool[:n-1]
		s.mu.Unlock()
		t.aborting, t.ended = nil, false
		return t
	}
	s.mu.Unlock()
	t := &txn{s: s, req: make(chan error, 1), done: make(chan error, 1)}
	t.cb = jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
		if len(args) == 0 {
			return nil
		}
		switch args[0].Int() {
		case evReqOK:
			t.req <- nil
		case evReqErr:
			var e error = jsglue.ErrUnknown
			if len(args) > 1 && args[1].Type() == js.TypeObject {
				if r := args[1].Get("target"); r.Type() == js.TypeObject {
					if re := r.Get("error"); re.Type() == js.TypeObject {
						e = jsglue.FromJS(re)
					}
				}
			}
			t.req <- e
		case evComplete:
			t.done <- nil
		case evAbort:
			var e error
			if te := t.v.Get("error"); te.Type() == js.TypeObject {
				e = jsglue.FromJS(te)
			}
			t.done <- abortError(e)
		}
		return nil
	})
	t.reqOK = t.cb.Value.Call("bind", nil, evReqOK)
	t.reqErr = t.cb.Value.Call("bind", nil, evReqErr)
	t.onComplete = t.cb.Value.Call("bind", nil, evComplete)
	t.onAbort = t.cb.Value.Call("bind", nil, evAbort)
	return t
}

func (s *IDBStore) putTxn(t *txn) {
	t.v = js.Undefined()
	s.mu.Lock()
	if len(s.pool) < 8 {
		s.pool = append(s.pool, t)
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	t.cb.Release()
}

// abortError is what an aborted transaction reports: its cause when
// IndexedDB gave one (QuotaExceededError, ConstraintError, ...), always
// matching ErrTxAborted.
func abortError(cause error) error {
	if cause == nil {
		return outbox.ErrTxAborted
	}
	return &abortedError{cause: cause}
}

type abortedError struct{ cause error }

func (e *abortedError) Error() string   { return "transaction aborted: " + e.cause.Error() }
func (e *abortedError) Unwrap() []error { return []error{outbox.ErrTxAborted, e.cause} }

// store returns the object store name of the transaction.
func (t *txn) store(name string) (js.Value, error) {
	return jsglue.Call(t.v, "objectStore", jsName(name))
}

// call issues a request (get, put, delete, getAll, count, ...) on target
// without awaiting it. A synchronous exception (DataError, DataCloneError,
// TransactionInactiveError) is returned at once.
func (t *txn) call(target js.Value, method string, args ...any) (js.Value, error) {
	return jsglue.Call(target, method, args...)
}

// wait awaits request r, which must be the last request issued so far. Its
// error (or the abort that followed an earlier request's error) is returned.
func (t *txn) wait(r js.Value) error {
	r.Set("onsuccess", t.reqOK)
	r.Set("onerror", t.reqErr)
	return <-t.req
}

// finish awaits the transaction's outcome: nil once it committed, the abort
// error otherwise. A readwrite method returns only after this, so a nil
// error means durable and an error means nothing was written.
func (t *txn) finish() error {
	if t.ended {
		return nil
	}
	t.ended = true
	err := <-t.done
	aborting := t.aborting
	t.s.putTxn(t)
	if err != nil && aborting != nil {
		return aborting
	}
	return err
}

// commit asks IndexedDB to commit now, once the requests issued so far
// succeed, instead of when the transaction next goes inactive with no
// request pending: the backend then runs the writes and the commit back to
// back, without a round trip to this page for the last request's success
// event first (about a tenth of a small durable transaction). Issue no
// request after it. Where IDBTransaction.commit is missing (older browsers)
// or throws (the transaction is already finishing), auto-commit applies and
// finish reports the outcome either way.
func (t *txn) commit() {
	if t.ended || !hasCommit {
		return
	}
	_, _ = jsglue.Call(t.v, "commit")
}

var hasCommit = func() bool {
	tx := js.Global().Get("IDBTransaction")
	return tx.Type() == js.TypeFunction && tx.Get("prototype").Get("commit").Type() == js.TypeFunction
}()

// abort rolls the transaction back and waits until IndexedDB confirms it, so
// the caller's error is returned only once nothing is left half-written.
// reason is the error reported (nil: ErrTxAborted).
func (t *txn) abort(reason error) error {
	if t.ended {
		return reason
	}
	if reason == nil {
		reason = outbox.ErrTxAborted
	}
	t.aborting = reason
	if _, err := jsglue.Call(t.v, "abort"); err != nil {
		// Already finished (committed or aborted by IndexedDB): report
		// what really happened.
		t.aborting = nil
		if ferr := t.finish(); ferr != nil {
			return ferr
		}
		return reason
	}
	_ = t.finish()
	return reason
}

// release drops the callback of a readonly transaction whose outcome the
// caller does not need (its reads succeeded); late events are no-ops.
func (t *txn) release() {
	if !t.ended {
		t.ended = true
		// Its complete event is still to come: never reuse this one.
		t.cb.Release()
	}
}

// fail handles an error met mid-transaction: abort and report it.
func (t *txn) fail(op string, err error) error {
	return t.abort(wrapIDB(op, err))
}

// wrapIDB turns an IndexedDB failure into an *IDBError (store sentinels and
// context errors pass through unchanged).
func wrapIDB(op string, err error) error {
	if err == nil {
		return nil
	}
	// errors.AsType rather than errors.As: no reflection in the download.
	if _, ok := errors.AsType[*IDBError](err); ok {
		return err
	}
	_, isJS := errors.AsType[*jsglue.JSError](err)
	_, isAbort := errors.AsType[*abortedError](err)
	if isJS || isAbort || errors.Is(err, outbox.ErrTxAborted) {
		return &IDBError{Op: op, Err: err}
	}
	return err
}
