//go:build js && wasm

// Package raw is the low-level IndexedDB layer that idb's fenced database
// and the outbox's store (outbox/idbstore) are built on: thin wrappers over
// syscall/js, because each call and each event crossing into Go is costly
// (docs/idb-notes.md has the design and its measurements). Four callbacks
// created at init serve every transaction and request; no goroutine per
// request. The page's freeze tracker (freeze_js.go) is here too: every
// connection OpenDatabase opens goes through it. Rules for code on this
// layer:
//
//   - Awaiting a request keeps its transaction alive; waiting on anything
//     else between two requests (a timer, a lock, fetch) lets it commit.
//   - A request that fails, at once or later, aborts its whole transaction,
//     and Tx.Await reports that first error.
//   - Calls returning objects or strings cost microseconds: convert
//     recurring strings once, prefer fire-and-check to awaiting each request.
package raw

import (
	"context"
	"errors"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

// Mode is a transaction's mode.
type Mode uint8

const (
	ReadOnly Mode = iota
	ReadWrite
)

// Durability is the durability hint of a readwrite transaction. Default is
// the browser's own choice; Strict waits for the data to reach the disk
// before complete fires (slower, survives power loss); Relaxed completes once
// the data is in the OS's hands.
type Durability uint8

const (
	DurabilityDefault Durability = iota
	DurabilityStrict
	DurabilityRelaxed
)

// TxOption tunes Begin.
type TxOption func(*txConfig)

type txConfig struct{ durability Durability }

// WithTxDurability sets the durability hint of the transaction.
func WithTxDurability(d Durability) TxOption { return func(c *txConfig) { c.durability = d } }

// ErrTxAborted matches (errors.Is) every error of an aborted transaction.
var ErrTxAborted = errors.New("idb: transaction aborted")

// ErrPending: Request.Result was asked for a request that has not settled.
var ErrPending = errors.New("idb: request still pending")

// AbortedError is what Tx.Await returns for an aborted transaction. Cause is
// why: the failed request's error (a *jsglue.JSError, so
// errors.Is(err, jsglue.ErrQuotaExceeded) or jsglue.ErrConstraint work), the
// reason given to the abort, or an AbortError when the transaction was
// aborted without one. It matches ErrTxAborted and its Cause.
type AbortedError struct{ Cause error }

func (e *AbortedError) Error() string   { return "idb: transaction aborted: " + e.Cause.Error() }
func (e *AbortedError) Unwrap() []error { return []error{ErrTxAborted, e.Cause} }

// Tx is one IndexedDB transaction driven from Go. Its methods are meant for
// the goroutine that began it (and cursor functions it passed); Await and
// Done may be used from anywhere.
type Tx struct {
	v    js.Value
	done chan struct{} // closed on complete or abort
	err  error         // outcome, valid once done is closed

	// cause is the error this layer aborted the transaction for (a request
	// that failed synchronously, a panic in a cursor function, Abort's
	// reason); IndexedDB's tx.error is null for such aborts.
	cause error
	// firstErr is the first request that failed synchronously; reported by
	// Await even if the transaction had already committed the others.
	firstErr error
	aborted  bool // abort() was accepted
}

// Begin starts a transaction over stores on db (an IDBDatabase). The
// transaction is active until control returns to JavaScript with no request
// of it pending: issue its first request now, and between requests wait only
// on its own requests.
func Begin(db js.Value, stores []string, mode Mode, opts ...TxOption) (*Tx, error) {
	var c txConfig
	for _, o := range opts {
		o(&c)
	}
	if len(stores) == 0 {
		return nil, jsglue.NewJSError("InvalidAccessError", "a transaction needs at least one store")
	}
	return begin(db, scopeOf(stores), mode, c.durability)
}

// BeginScope is Begin over a scope made once by ScopeOf, for a caller that
// opens transactions over the same stores again and again.
func BeginScope(db, scope js.Value, mode Mode, opts ...TxOption) (*Tx, error) {
	var c txConfig
	for _, o := range opts {
		o(&c)
	}
	return begin(db, scope, mode, c.durability)
}

func begin(db, scope js.Value, mode Mode, dur Durability) (*Tx, error) {
	m := jsReadOnly
	if mode == ReadWrite {
		m = jsReadWrite
	}
	var v js.Value
	var err error
	if dur == DurabilityDefault {
		v, err = call(db, "transaction", scope, m)
	} else {
		v, err = call(db, "transaction", scope, m, durabilityOpts[dur])
	}
	if err != nil {
		return nil, err
	}
	return wrapTx(v), nil
}

// WrapTx wraps transaction v, opened outside this layer (by a hook in
// JavaScript), so that it can be awaited: its complete and abort handlers
// become this layer's. Requests it issued are its own to handle.
func WrapTx(v js.Value) *Tx { return wrapTx(v) }

// AdoptTx is WrapTx for a transaction whose complete and abort handlers
// JavaScript already set to the ones Handlers returns, before any event.
func AdoptTx(v js.Value) *Tx { return registered(v) }

// Handlers are this layer's success, error, complete and abort handlers,
// for JavaScript that opens a transaction and issues a request itself and
// hands both to Go (AdoptTx, Tx.AdoptRequest) without a call back to set
// them.
func Handlers() (success, failure, complete, abort js.Value) {
	return hSuccess, hError, hComplete, hAbort
}

// wrapTx registers a transaction (also the versionchange one of an upgrade)
// so its complete/abort event reaches Go.
func wrapTx(v js.Value) *Tx {
	t := registered(v)
	v.Set("oncomplete", hComplete)
	v.Set("onabort", hAbort)
	return t
}

// registered wraps transaction v, whose complete and abort handlers are
// (or are about to be, before any event) hComplete and hAbort.
func registered(v js.Value) *Tx {
	t := &Tx{v: v, done: make(chan struct{})}
	regMu.Lock()
	liveTxs = append(liveTxs, t)
	regMu.Unlock()
	return t
}

// JS returns the IDBTransaction.
func (t *Tx) JS() js.Value { return t.v }

// Store returns the object store name of the transaction's scope. If the
// name is not in the scope, every request on the Store fails with
// NotFoundError (and so aborts the transaction); Store.Err says so at once.
func (t *Tx) Store(name string) Store {
	v, err := call(t.v, "objectStore", jsString(name))
	return Store{src{v: v, tx: t, err: err}}
}

// RefusedStore is a Store of the transaction on which every request fails
// with err (and so aborts the transaction), for a layer above that refuses
// a name (idb's reserved stores); its Err is err.
func (t *Tx) RefusedStore(err error) Store { return Store{src{tx: t, err: err}} }

// Commit asks IndexedDB to commit now instead of when the event loop next
// finds no pending request: it saves a round trip through the event loop.
// Requests already issued still run; none may be issued after. Where the
// browser has no commit(), it does nothing. An error means the transaction
// had already finished or was no longer active.
func (t *Tx) Commit() error {
	if !hasCommit {
		return nil
	}
	_, err := call(t.v, "commit")
	return err
}

// Abort rolls the transaction back. It returns nil when the transaction is
// aborted (now, or by an earlier Abort or failed request issued through this
// layer); an error (InvalidStateError) when it is already committing or
// finished, in which case its outcome is whatever Await reports.
func (t *Tx) Abort() error { return t.abortWith(nil) }

// AbortWith is Abort with the reason Await reports (wrapped in an
// AbortedError), when IndexedDB gives no error of its own.
func (t *Tx) AbortWith(reason error) error { return t.abortWith(reason) }

func (t *Tx) abortWith(reason error) error {
	if t.aborted {
		return nil
	}
	if _, err := call(t.v, "abort"); err != nil {
		return err
	}
	t.aborted = true
	if t.cause == nil {
		t.cause = reason
	}
	return nil
}

// failed records a request that failed synchronously and aborts the
// transaction for it (see the failure rule at the top of this file).
func (t *Tx) failed(err error) {
	if t.firstErr == nil {
		t.firstErr = err
	}
	_ = t.abortWith(err)
}

// Done is closed when the transaction has completed or aborted.
func (t *Tx) Done() <-chan struct{} { return t.done }

// Err is the transaction's outcome once Done is closed (nil before): nil
// when it committed, an *AbortedError when it aborted.
func (t *Tx) Err() error {
	select {
	case <-t.done:
		return t.outcome()
	default:
		return nil
	}
}

// outcome is the error Await reports once done is closed. firstErr is read
// now, not at the complete event: a request refused after the transaction
// finished is still reported.
func (t *Tx) outcome() error {
	if t.err == nil && t.firstErr != nil {
		return t.firstErr
	}
	return t.err
}

// Await waits for the transaction to finish. It returns nil when it
// committed, and an *AbortedError (matching ErrTxAborted and the cause, e.g.
// jsglue.ErrQuotaExceeded or jsglue.ErrConstraint) when it aborted. If a
// request failed synchronously after the transaction had already finished
// (TransactionInactiveError: the caller waited on something else between two
// requests), that error is returned although earlier requests may have
// committed.
//
// If ctx ends first, Await aborts the transaction and returns ctx.Err() at
// once: nothing of it is written. If the transaction is already committing
// it cannot be stopped; Await then waits for its outcome (milliseconds) and
// returns nil if it committed, since reporting failure for a write that
// happened would be a lie.
func (t *Tx) Await(ctx context.Context) error {
	select {
	case <-t.done:
		return t.outcome()
	default:
	}
	if cd := ctx.Done(); cd == nil {
		<-t.done
		return t.outcome()
	} else {
		select {
		case <-t.done:
			return t.outcome()
		case <-cd:
		}
	}
	if t.abortWith(context.Cause(ctx)) == nil {
		return ctx.Err()
	}
	<-t.done
	if t.err == nil {
		return t.outcome() // committed
	}
	return ctx.Err()
}

// Committed reports whether the transaction has finished by committing,
// whatever requests were refused afterwards (which Await reports): the
// requests issued before it finished are written.
func (t *Tx) Committed() bool {
	select {
	case <-t.done:
		return t.err == nil
	default:
		return false
	}
}

// ---- the callbacks ----
//
// Four jsglue callbacks, one per event kind, serve the whole program. The
// handler finds the Go side of an event's target by identity (js.Value.Equal
// is JavaScript's ===, decided in Go without a call) in two short lists: the
// live transactions and the requests being awaited. Both hold only what is
// in flight, so a scan is a handful of comparisons; an id stored on the
// object would cost a JavaScript call to write and one to read per event.

var (
	regMu    sync.Mutex
	liveTxs  []*Tx
	awaiting []*Request

	hSuccess, hError, hComplete, hAbort js.Value

	jsReadOnly, jsReadWrite, jsDone js.Value
	jsDirections                    [4]js.Value
	durabilityOpts                  [3]js.Value
	jsKeyRange                      js.Value
	jsObject                        js.Value
	hasCommit                       bool
)

func init() {
	// Created once and never released: the count of live jsglue callbacks
	// does not move with transactions or requests. One callback per kind
	// rather than one bound to a kind argument: each argument is a call
	// across the wasm boundary when the event comes in.
	hSuccess = jsglue.NewCallback(onRequest(stOK)).Value
	hError = jsglue.NewCallback(onRequest(stFailed)).Value
	hComplete = jsglue.NewCallback(onTx(false)).Value
	hAbort = jsglue.NewCallback(onTx(true)).Value

	jsReadOnly = js.ValueOf("readonly")
	jsReadWrite = js.ValueOf("readwrite")
	jsDone = js.ValueOf("done")
	for i, d := range []string{"next", "nextunique", "prev", "prevunique"} {
		jsDirections[i] = js.ValueOf(d)
	}
	for i, d := range []string{"default", "strict", "relaxed"} {
		o := js.Global().Get("Object").New()
		o.Set("durability", d)
		durabilityOpts[i] = o
	}
	jsKeyRange = js.Global().Get("IDBKeyRange")
	jsObject = js.Global().Get("Object")
	if t := js.Global().Get("IDBTransaction"); t.Type() == js.TypeFunction {
		hasCommit = t.Get("prototype").Get("commit").Type() == js.TypeFunction
	}
}

// target returns the event's target (args[0] is the event).
func target(args []js.Value) (js.Value, bool) {
	if len(args) == 0 || args[0].Type() != js.TypeObject {
		return js.Undefined(), false
	}
	t := args[0].Get("target")
	return t, t.Type() == js.TypeObject
}

// onTx handles complete (aborted false) and abort events. Runs on the
// JavaScript event loop and returns at once. Not inlined: init calls it
// twice, and inlining would compile the closure body twice.
//
//go:noinline
func onTx(aborted bool) func(js.Value, []js.Value) any {
	return func(_ js.Value, args []js.Value) any {
		regMu.Lock()
		i := findTx(args)
		var t *Tx
		if i >= 0 {
			t = liveTxs[i]
			last := len(liveTxs) - 1
			liveTxs[i] = liveTxs[last]
			liveTxs[last] = nil
			liveTxs = liveTxs[:last]
		}
		regMu.Unlock()
		if t == nil {
			return nil
		}
		if aborted {
			t.err = t.abortCause()
		}
		close(t.done)
		return nil
	}
}

// findTx returns the index in liveTxs of the event's transaction, or -1.
// Handlers are installed only on registered transactions and each fires
// once, so with one transaction in flight (the common case) the event is
// its own and reading event.target — a call that makes a JavaScript object
// reference, the costly kind — is skipped. Called with regMu held.
func findTx(args []js.Value) int {
	if len(liveTxs) == 1 {
		return 0
	}
	v, ok := target(args)
	if !ok {
		return -1
	}
	for i, x := range liveTxs {
		if x.v.Equal(v) {
			return i
		}
	}
	return -1
}

// findRequest is findTx for awaited requests (and running cursors): their
// handlers are installed only while they are in awaiting.
func findRequest(args []js.Value) *Request {
	if len(awaiting) == 1 {
		return awaiting[0]
	}
	v, ok := target(args)
	if !ok {
		return nil
	}
	for _, x := range awaiting {
		if x.v.Equal(v) {
			return x
		}
	}
	return nil
}

// onRequest handles success (state stOK) and error (stFailed) events of
// awaited requests, and every success of a cursor. Not inlined, like onTx.
//
//go:noinline
func onRequest(state uint8) func(js.Value, []js.Value) any {
	return func(_ js.Value, args []js.Value) any {
		regMu.Lock()
		r := findRequest(args)
		regMu.Unlock()
		if r == nil {
			return nil
		}
		if state == stOK && r.each != nil {
			if !r.step() {
				return nil // the cursor moves on; its next success comes here
			}
		} else {
			r.state = state
		}
		regMu.Lock()
		for i, x := range awaiting {
			if x == r {
				last := len(awaiting) - 1
				awaiting[i] = awaiting[last]
				awaiting[last] = nil
				awaiting = awaiting[:last]
				break
			}
		}
		regMu.Unlock()
		close(r.ch)
		return nil
	}
}

func (t *Tx) abortCause() error {
	var cause error
	if e := t.v.Get("error"); e.Type() == js.TypeObject {
		cause = jsglue.FromJS(e)
	} else if t.cause != nil {
		cause = t.cause
	} else if c := frozenCause(t.v); c != nil {
		cause = c
	} else {
		cause = jsglue.NewJSError("AbortError", "the transaction was aborted")
	}
	return &AbortedError{Cause: cause}
}

// pending reports the registered transactions and awaited requests not yet
// settled (tests check that nothing is left behind).
func pending() (int, int) {
	regMu.Lock()
	defer regMu.Unlock()
	return len(liveTxs), len(awaiting)
}
