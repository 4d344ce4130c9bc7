//go:build js && wasm

package jsglue

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"syscall/js"
)

// ErrNotThenable is returned by Await for a value that is not a promise-like.
var ErrNotThenable = errors.New("jsglue: value is not a promise")

type settlement struct {
	v   js.Value
	err error
}

// Await waits for a JavaScript promise (or any thenable; a plain value is
// returned as is) to settle, or for ctx to end. On cancellation it returns
// ctx.Err() at once; the promise's later settlement is dropped. The
// rejection reason becomes a *JSError (see FromJS).
func Await(ctx context.Context, p js.Value) (js.Value, error) {
	if err := ctx.Err(); err != nil {
		return js.Undefined(), err
	}
	if p.Type() != js.TypeObject || p.Get("then").Type() != js.TypeFunction {
		return p, nil
	}
	ch := make(chan settlement, 1)
	var cb *Callback
	cb = NewCallback(func(_ js.Value, args []js.Value) any {
		cb.Release()
		var s settlement
		if len(args) >= 2 {
			if args[0].Bool() {
				s.v = args[1]
			} else {
				s.err = FromJS(args[1])
			}
		}
		ch <- s
		return nil
	})
	ok := cb.Value.Call("bind", nil, true)
	fail := cb.Value.Call("bind", nil, false)
	if _, err := Call(p, "then", ok, fail); err != nil {
		cb.Release()
		return js.Undefined(), err
	}
	select {
	case s := <-ch:
		return s.v, s.err
	case <-ctx.Done():
		cb.Release()
		return js.Undefined(), ctx.Err()
	}
}

// Deferred is a JavaScript promise that Go settles later. It is how a
// callback that JavaScript calls synchronously (a Web Lock callback, an
// exported API method) returns at once while Go keeps working.
type Deferred struct {
	Promise js.Value
	// r is the {promise, resolve, reject} of Promise.withResolvers. The
	// functions are called as its methods (they ignore this) rather than
	// read out: two fewer crossings and references per promise.
	r    js.Value
	done bool
}

var jsPromise = js.Global().Get("Promise")

// NewDeferred creates an unsettled promise.
func NewDeferred() *Deferred {
	r := jsPromise.Call("withResolvers")
	return &Deferred{Promise: r.Get("promise"), r: r}
}

// Resolve settles the promise with v (any value js.ValueOf accepts). Only
// the first Resolve or Reject has an effect.
func (d *Deferred) Resolve(v any) {
	if d.done {
		return
	}
	d.done = true
	d.r.Call("resolve", v)
}

// Reject settles the promise with a JavaScript Error built from err.
func (d *Deferred) Reject(err error) {
	if d.done {
		return
	}
	d.done = true
	d.r.Call("reject", ToJS(err))
}

// Settle resolves with v when err is nil and rejects otherwise.
func (d *Deferred) Settle(v any, err error) {
	if err != nil {
		d.Reject(err)
		return
	}
	d.Resolve(v)
}

// Async runs fn on a new goroutine and returns a promise of its result:
// the way to export a blocking Go function to JavaScript. A panic in fn
// rejects the promise instead of killing the program.
//
// Before returning, Async yields once (runtime.Gosched): on js/wasm the
// new goroutine then runs at once, until it finishes or waits for
// JavaScript. If it finished — fn did not block, as many API calls do not —
// the result is returned as an already-settled promise (Promise.resolve or
// Promise.reject), without the resolver functions of a pending one and the
// later call to settle it. Otherwise the promise is pending and the
// goroutine settles it. Either way the caller sees the same value.
func Async(fn func() (any, error)) js.Value {
	a := &asyncCall{}
	go a.run(fn)
	runtime.Gosched()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done {
		if a.err != nil {
			return jsPromise.Call("reject", ToJS(a.err))
		}
		return jsPromise.Call("resolve", a.v)
	}
	a.d = NewDeferred()
	return a.d.Promise
}

type asyncCall struct {
	mu   sync.Mutex
	done bool
	v    any
	err  error
	d    *Deferred // set when Async returned before fn finished
}

func (a *asyncCall) run(fn func() (any, error)) {
	var v any
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				v, err = nil, recoveredError(r)
			}
		}()
		v, err = fn()
	}()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.d != nil {
		a.d.Settle(v, err)
		return
	}
	a.done, a.v, a.err = true, v, err
}

// Signal returns an AbortSignal that aborts when ctx ends, for JavaScript
// APIs that take one (navigator.locks.request, fetch). Call stop when the
// operation is over so nothing keeps watching ctx.
func Signal(ctx context.Context) (signal js.Value, stop func() bool) {
	ac := js.Global().Get("AbortController").New()
	if ctx.Err() != nil { // abort before the caller issues the request
		ac.Call("abort", ToJS(context.Cause(ctx)))
	}
	stop = context.AfterFunc(ctx, func() {
		ac.Call("abort", ToJS(context.Cause(ctx)))
	})
	return ac.Get("signal"), stop
}
