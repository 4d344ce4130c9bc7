//go:build js && wasm

package idbstore

import (
	"context"
	"errors"
	"syscall/js"

	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
)

// txn is one store operation's transaction: a raw.Tx (the raw layer
// owns its events, its commit and its abort cause) with the store's
// conventions on top. The store's hot path issues every request of a phase
// without awaiting it and awaits only the LAST one (IndexedDB completes the
// requests of a transaction in the order they were issued, so the earlier
// results are ready then), then awaits the transaction once.
//
// Nothing but pure Go runs between the requests of a txn: no timer, lock,
// channel or fetch, so the transaction never goes inactive mid-way.
type txn struct {
	tx *raw.Tx
	// aborting is the error the store aborted with itself, so finish
	// reports why.
	aborting error
	ended    bool
}

// beginCtx is begin once ctx is checked: a call whose context has ended
// opens no transaction.
func (s *Store) beginCtx(ctx context.Context, op string, mode raw.Mode, stores ...string) (*txn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return s.begin(op, mode, stores...)
}

// begin opens a transaction on stores. Only Enqueue's transaction carries
// the configured durability hint (see Open).
func (s *Store) begin(op string, mode raw.Mode, stores ...string) (*txn, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	var opts []raw.TxOption
	if mode == raw.ReadWrite && op == "enqueue" && s.durability != raw.DurabilityDefault {
		opts = []raw.TxOption{raw.WithTxDurability(s.durability)}
	}
	tx, err := raw.Begin(s.db, stores, mode, opts...)
	if err != nil {
		return nil, s.notOpened(op, err)
	}
	return &txn{tx: tx}, nil
}

// notOpened is the error of op when IndexedDB refused to open its
// transaction or to issue its requests there and then (err): the store's
// own error once it is shut, or an Error.
func (s *Store) notOpened(op string, err error) error {
	if cerr := s.Err(); cerr != nil {
		return cerr
	}
	if errors.Is(err, jsglue.ErrInvalidState) {
		// The connection is closing (versionchange, or the browser
		// closed it): the store is unusable from now on.
		s.shut(outbox.ErrStoreClosed)
		return s.Err()
	}
	return &Error{Op: op, Err: err}
}

// jsNames holds the constant strings the store passes to IndexedDB (index
// names) as JavaScript strings made once: syscall/js turns every Go string
// argument into a new JavaScript string and a reference it tracks with a
// finalizer, which costs more than the call itself when the Go heap holds
// many.
var jsNames = func() map[string]js.Value {
	m := map[string]js.Value{}
	for _, s := range []string{storeRecords, indexID, indexLive, indexOpKey, indexEntity, indexStatus, indexUser} {
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

// abortError is what an aborted transaction reports: its cause when
// IndexedDB gave one (QuotaExceededError, ConstraintError, ...), always
// matching outbox.ErrTxAborted.
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
	st := t.tx.Store(name)
	return st.JS(), st.Err()
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
	// Requests always settle (an aborted transaction fails them), so
	// Background cannot hang here.
	_, err := t.tx.Wrap(r).Await(context.Background())
	return err
}

// finish awaits the transaction's outcome: nil once it committed, the abort
// error otherwise. A readwrite method returns only after this, so a nil
// error means durable and an error means nothing was written.
func (t *txn) finish() error {
	if t.ended {
		return nil
	}
	t.ended = true
	// Background: the transaction never waits on the outside world, so
	// its outcome comes soon, and a method reports the truth.
	err := t.tx.Await(context.Background())
	if err != nil && t.aborting != nil {
		return t.aborting
	}
	if ae, ok := err.(*raw.AbortedError); ok { // Tx.Await's own error, never wrapped
		return abortError(ae.Cause)
	}
	return err
}

// commit asks IndexedDB to commit now, once the requests issued so far
// succeed (raw.Tx.Commit: it saves a round trip to this page). Issue no
// request after it; finish reports the outcome either way.
func (t *txn) commit() {
	if !t.ended {
		_ = t.tx.Commit()
	}
}

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
	if err := t.tx.AbortWith(reason); err != nil {
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

// release leaves a readonly transaction whose outcome the caller does not
// need (its reads succeeded) to finish on its own.
func (t *txn) release() { t.ended = true }

// fail handles an error met mid-transaction: abort and report it.
func (t *txn) fail(op string, err error) error {
	return t.abort(wrapIDB(op, err))
}

// wrapIDB turns an IndexedDB failure into an *Error (store sentinels and
// context errors pass through unchanged).
func wrapIDB(op string, err error) error {
	if err == nil {
		return nil
	}
	// errors.AsType rather than errors.As: no reflection in the download.
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	_, isJS := errors.AsType[*jsglue.JSError](err)
	_, isAbort := errors.AsType[*abortedError](err)
	if isJS || isAbort || errors.Is(err, outbox.ErrTxAborted) {
		return &Error{Op: op, Err: err}
	}
	return err
}
