//go:build js && wasm

package main

import (
	"errors"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

// Conventions between the Go API objects and the loader (jsglue/loader/tabfence.js):
//
//   - A function that can only fail asynchronously returns a Promise and is
//     marked with Symbol.for("tabfence.async"), so the loader knows to reject
//     (not throw) once the runtime has exited.
//   - A synchronous function cannot throw from Go (a panic would kill the
//     runtime), so on failure it returns an Error marked with
//     Symbol.for("tabfence.throw"); the loader throws it.
//   - Getters are plain accessor properties.
//
// Objects handed out per instance (one per elect() call) do not allocate a
// Go callback each: each kind of object has a method table (objects), every
// method is one shared callback bound to the instance's handle number
// (Function.prototype.bind prepends it), and a handle that is gone behaves
// as closed. So the count of live callbacks does not grow with the number
// of elections.

var (
	symAsync  = js.Global().Get("Symbol").Call("for", "tabfence.async")
	symThrow  = js.Global().Get("Symbol").Call("for", "tabfence.throw")
	jsObject  = js.Global().Get("Object")
	jsReflect = js.Global().Get("Reflect")
	jsConsole = js.Global().Get("console")
	jsArray   = js.Global().Get("Array")
	jsPromise = js.Global().Get("Promise")
	// Promise.resolve bound to Promise, called with Invoke: no method name
	// decoded per post.
	jsPromiseResolve = jsPromise.Get("resolve").Call("bind", jsPromise)
)

func newObject() js.Value { return jsObject.New() }

// errInternal is what a panic in a synchronous method becomes.
var errInternal = errors.New("tabfence: internal error (see the console)")

// callKind is how JavaScript calls a method (see the conventions above).
type callKind uint8

const (
	syncCall    callKind = iota // returns its result; its error is thrown by the loader
	getterCall                  // an accessor property, called like syncCall
	asyncCall                   // runs on its own goroutine (it may block), returns a Promise
	promiseCall                 // never blocks: runs in the call, returns a settled Promise
)

// export makes fn a callback called as k says.
func (k callKind) export(fn func(args []js.Value) (any, error)) *jsglue.Callback {
	switch k {
	case asyncCall:
		cb := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
			return jsglue.Async(func() (any, error) { return fn(args) })
		})
		jsReflect.Call("set", cb.Value, symAsync, true)
		return cb
	case promiseCall:
		// asyncFunc's goroutine costs a later turn of the event loop (about
		// 0.3 ms), which a channel round trip would pay twice.
		cb := syncCall.export(func(args []js.Value) (any, error) {
			v, err := fn(args)
			if err != nil {
				return jsPromise.Call("reject", jsglue.ToJS(err)), nil
			}
			return jsPromiseResolve.Invoke(v), nil
		})
		jsReflect.Call("set", cb.Value, symAsync, true)
		return cb
	}
	return jsglue.NewCallback(func(_ js.Value, args []js.Value) (ret any) {
		defer func() {
			if r := recover(); r != nil {
				reportPanic(r)
				ret = throwable(errInternal)
			}
		}()
		v, err := fn(args)
		if err != nil {
			return throwable(err)
		}
		return v
	})
}

func (k callKind) async() bool { return k == asyncCall || k == promiseCall }

// throwable is err as a JavaScript Error the loader will throw.
func throwable(err error) js.Value {
	e := jsglue.ToJS(err)
	jsReflect.Call("set", e, symThrow, true)
	return e
}

// defineGetter adds a read-only accessor property backed by Go.
func defineGetter(obj js.Value, name string, get js.Value) {
	jsObject.Call("defineProperty", obj, name, map[string]any{"get": get, "enumerable": true})
}

// defineConst adds a read-only data property.
func defineConst(obj js.Value, name string, v any) {
	jsObject.Call("defineProperty", obj, name, map[string]any{"value": v, "enumerable": true})
}

// apiFunc is one function of the API object itself (tf.elect, tf.fence…).
type apiFunc struct {
	name string
	call callKind
	fn   func(args []js.Value) (any, error)
}

// method is one row of a method table: JavaScript calls obj.name(...args),
// Go runs fn with the object's state and args.
type method[T any] struct {
	name string
	call callKind
	fn   func(T, []js.Value) (any, error)
	// idle, when set, is what a method of a released object returns
	// (closing twice is fine, a closed election leads nothing); else the
	// call fails with the table's error.
	idle any
	// wrap, when set, makes the installed function from the bound one: the
	// loader's fast paths (post, enqueue) wrap the js.Func.
	wrap func(id float64, bound js.Value) js.Value
	// detached: not installed on the object; bound by hand (unsubscribe).
	detached bool
}

// objects is one kind of API object: the Go state of each object handed to
// the page, by handle, and its method table, one callback per row.
type objects[T any] struct {
	handles[T]
	gone error // what a method of a released object fails with
	rows []method[T]
	cbs  []*jsglue.Callback
}

// define makes the callbacks of the method table rows.
func (o *objects[T]) define(gone error, rows ...method[T]) {
	o.gone, o.rows = gone, rows
	o.cbs = make([]*jsglue.Callback, len(rows))
	for i := range rows {
		r := &o.rows[i]
		o.cbs[i] = r.call.export(func(args []js.Value) (any, error) {
			v, ok := o.get(args)
			switch {
			case ok:
				return r.fn(v, args[1:])
			case r.idle != nil:
				return r.idle, nil
			}
			return nil, o.gone
		})
	}
}

// install puts the methods of the object with handle id on obj.
func (o *objects[T]) install(obj js.Value, id float64) {
	for i, r := range o.rows {
		if r.detached {
			continue
		}
		f := o.bind(i, id)
		if r.wrap != nil {
			f = r.wrap(id, f)
		}
		if r.call == getterCall {
			defineGetter(obj, r.name, f)
		} else {
			defineConst(obj, r.name, f)
		}
	}
}

// bind returns row i's callback bound to handle id (and extra arguments):
// JavaScript calls it with its own arguments, Go receives these first.
func (o *objects[T]) bind(i int, id float64, extra ...any) js.Value {
	f := o.cbs[i].Value.Call("bind", append([]any{nil, id}, extra...)...)
	if o.rows[i].call.async() {
		jsReflect.Call("set", f, symAsync, true) // bind drops own properties
	}
	return f
}

// row returns the index of the row named name.
func (o *objects[T]) row(name string) int {
	for i, r := range o.rows {
		if r.name == name {
			return i
		}
	}
	panic("tabfence: no method " + name)
}

// handles maps the numbers bound into instance methods to Go state.
type handles[T any] struct {
	mu   sync.Mutex
	next float64
	m    map[float64]T
}

func (h *handles[T]) add(v T) float64 {
	h.mu.Lock()
	if h.m == nil {
		h.m = map[float64]T{}
	}
	h.next++
	id := h.next
	h.m[id] = v
	h.mu.Unlock()
	return id
}

// get returns the state for the handle in args[0], if it is still open.
func (h *handles[T]) get(args []js.Value) (v T, ok bool) {
	if len(args) == 0 || args[0].Type() != js.TypeNumber {
		return v, false
	}
	return h.lookup(args[0].Float())
}

func (h *handles[T]) lookup(id float64) (v T, ok bool) {
	h.mu.Lock()
	v, ok = h.m[id]
	h.mu.Unlock()
	return v, ok
}

func (h *handles[T]) remove(id float64) {
	h.mu.Lock()
	delete(h.m, id)
	h.mu.Unlock()
}

// at is args[i], undefined past the end.
func at(args []js.Value, i int) js.Value {
	if i < len(args) {
		return args[i]
	}
	return js.Undefined()
}

// argOf reads a JavaScript value for the native validators in args.go.
func argOf(v js.Value) arg {
	t, ok := jsglue.TypeOf(v)
	if !ok {
		return arg{Kind: kindBigInt} // the only value syscall/js cannot type
	}
	switch t {
	case js.TypeUndefined:
		return arg{Kind: kindUndefined}
	case js.TypeNull:
		return arg{Kind: kindNull}
	case js.TypeBoolean:
		if v.Bool() {
			return arg{Kind: kindBoolean, Num: 1}
		}
		return arg{Kind: kindBoolean}
	case js.TypeNumber:
		return arg{Kind: kindNumber, Num: v.Float()}
	case js.TypeString:
		return arg{Kind: kindString, Str: v.String()}
	case js.TypeSymbol:
		return arg{Kind: kindSymbol}
	case js.TypeFunction:
		return arg{Kind: kindFunction}
	}
	return arg{Kind: kindObject}
}

// isType reports whether v has type t (false for a BigInt).
func isType(v js.Value, t js.Type) bool {
	vt, ok := jsglue.TypeOf(v)
	return ok && vt == t
}

// field is jsglue.Field: obj[name], undefined when it cannot be read.
func field(obj js.Value, name string) js.Value { return jsglue.Field(obj, name) }

// callLater calls a user callback in a microtask, never from Go directly:
// an exception it throws is reported like any uncaught error instead of
// unwinding into Go, and a callback that calls back into the API (resign in
// onLost) does not re-enter Go while Go holds a lock.
func callLater(fn js.Value, args ...any) {
	if fn.Type() != js.TypeFunction {
		return
	}
	b := fn.Call("bind", append([]any{nil}, args...)...)
	jsQueueMicrotask.Invoke(b)
}

// jsQueueMicrotask is called with Invoke (this undefined, which Web IDL
// operations of the global scope accept): no method name to decode.
var jsQueueMicrotask = js.Global().Get("queueMicrotask")

func reportError(msg string, err error) {
	jsConsole.Call("error", msg, jsglue.ToJS(err))
}
