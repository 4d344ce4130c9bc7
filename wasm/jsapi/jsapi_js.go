//go:build js && wasm

package jsapi

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
// The objects handed out per instance (one per elect() call) do not allocate a
// Go callback each: each kind of object has a method table (Objects), every
// method is one shared callback bound to the instance's handle number
// (Function.prototype.bind prepends it), and a handle that is gone behaves
// as closed. So the count of live callbacks does not grow with the number
// of elections.

var (
	SymAsync  = js.Global().Get("Symbol").Call("for", "tabfence.async")
	SymThrow  = js.Global().Get("Symbol").Call("for", "tabfence.throw")
	JSObject  = js.Global().Get("Object")
	JSReflect = js.Global().Get("Reflect")
	JSConsole = js.Global().Get("console")
	JSArray   = js.Global().Get("Array")
	JSPromise = js.Global().Get("Promise")
	// Promise.resolve bound to Promise, called with Invoke: no method name
	// decoded per post.
	jsPromiseResolve = JSPromise.Get("resolve").Call("bind", JSPromise)
)

func NewObject() js.Value { return JSObject.New() }

// ErrInternal is what a panic in a synchronous method becomes.
var ErrInternal = errors.New("tabfence: internal error (see the console)")

// CallKind is how JavaScript calls a method (see the conventions above).
type CallKind uint8

const (
	Sync    CallKind = iota // returns its result; its error is thrown by the loader
	Getter                  // an accessor property, called like syncCall
	Async                   // runs on its own goroutine (it may block), returns a Promise
	Promise                 // never blocks: runs in the call, returns a settled Promise
)

// export makes fn a callback called as k says.
func (k CallKind) Export(fn func(args []js.Value) (any, error)) *jsglue.Callback {
	switch k {
	case Async:
		cb := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
			return jsglue.Async(func() (any, error) { return fn(args) })
		})
		JSReflect.Call("set", cb.Value, SymAsync, true)
		return cb
	case Promise:
		// An Async goroutine costs a later turn of the event loop, which a
		// channel round trip would pay twice (docs/jsapi-notes.md).
		cb := Sync.Export(func(args []js.Value) (any, error) {
			v, err := fn(args)
			if err != nil {
				return JSPromise.Call("reject", jsglue.ToJS(err)), nil
			}
			return jsPromiseResolve.Invoke(v), nil
		})
		JSReflect.Call("set", cb.Value, SymAsync, true)
		return cb
	}
	return jsglue.NewCallback(func(_ js.Value, args []js.Value) (ret any) {
		defer func() {
			if r := recover(); r != nil {
				ReportPanic(r)
				ret = Throwable(ErrInternal)
			}
		}()
		v, err := fn(args)
		if err != nil {
			return Throwable(err)
		}
		return v
	})
}

func (k CallKind) IsAsync() bool { return k == Async || k == Promise }

// Throwable is err as a JavaScript Error the loader will throw.
func Throwable(err error) js.Value {
	e := jsglue.ToJS(err)
	JSReflect.Call("set", e, SymThrow, true)
	return e
}

// DefineGetter adds a read-only accessor property backed by Go.
func DefineGetter(obj js.Value, name string, get js.Value) {
	JSObject.Call("defineProperty", obj, name, map[string]any{"get": get, "enumerable": true})
}

// DefineConst adds a read-only data property.
func DefineConst(obj js.Value, name string, v any) {
	JSObject.Call("defineProperty", obj, name, map[string]any{"value": v, "enumerable": true})
}

// Func is one function of the API object itself (tf.elect, tf.fence…).
type Func struct {
	Name string
	Call CallKind
	Fn   func(args []js.Value) (any, error)
}

// Method is one row of a method table: JavaScript calls obj.name(...args),
// Go runs fn with the object's state and args.
type Method[T any] struct {
	Name string
	Call CallKind
	Fn   func(T, []js.Value) (any, error)
	// idle, when set, is what a method of a released object returns
	// (closing twice is fine, a closed election leads nothing); else the
	// call fails with the table's error.
	Idle any
	// wrap, when set, makes the installed function from the bound one: the
	// loader's fast paths (post, enqueue) wrap the js.Func.
	Wrap func(id float64, bound js.Value) js.Value
	// detached: not installed on the object; bound by hand (unsubscribe).
	Detached bool
}

// Objects is one kind of API object: the Go state of each object handed to
// the page, by handle, and its method table, one callback per row.
type Objects[T any] struct {
	Handles[T]
	gone error // what a method of a released object fails with
	rows []Method[T]
	cbs  []*jsglue.Callback
}

// define makes the callbacks of the method table rows.
func (o *Objects[T]) Define(gone error, rows ...Method[T]) {
	o.gone, o.rows = gone, rows
	o.cbs = make([]*jsglue.Callback, len(rows))
	for i := range rows {
		r := &o.rows[i]
		o.cbs[i] = r.Call.Export(func(args []js.Value) (any, error) {
			v, ok := o.Get(args)
			switch {
			case ok:
				return r.Fn(v, args[1:])
			case r.Idle != nil:
				return r.Idle, nil
			}
			return nil, o.gone
		})
	}
}

// install puts the methods of the object with handle id on obj.
func (o *Objects[T]) Install(obj js.Value, id float64) {
	for i, r := range o.rows {
		if r.Detached {
			continue
		}
		f := o.Bind(i, id)
		if r.Wrap != nil {
			f = r.Wrap(id, f)
		}
		if r.Call == Getter {
			DefineGetter(obj, r.Name, f)
		} else {
			DefineConst(obj, r.Name, f)
		}
	}
}

// bind returns row i's callback bound to handle id (and extra arguments):
// JavaScript calls it with its own arguments, Go receives these first.
func (o *Objects[T]) Bind(i int, id float64, extra ...any) js.Value {
	f := o.cbs[i].Value.Call("bind", append([]any{nil, id}, extra...)...)
	if o.rows[i].Call.IsAsync() {
		JSReflect.Call("set", f, SymAsync, true) // bind drops own properties
	}
	return f
}

// Handles maps the numbers bound into instance methods to Go state.
type Handles[T any] struct {
	mu   sync.Mutex
	next float64
	m    map[float64]T
}

func (h *Handles[T]) Add(v T) float64 {
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
func (h *Handles[T]) Get(args []js.Value) (v T, ok bool) {
	if len(args) == 0 || args[0].Type() != js.TypeNumber {
		return v, false
	}
	return h.Lookup(args[0].Float())
}

func (h *Handles[T]) Lookup(id float64) (v T, ok bool) {
	h.mu.Lock()
	v, ok = h.m[id]
	h.mu.Unlock()
	return v, ok
}

// Last is the state of the handle added last, if it is still open.
func (h *Handles[T]) Last() (T, bool) { return h.Lookup(h.next) }

func (h *Handles[T]) Remove(id float64) {
	h.mu.Lock()
	delete(h.m, id)
	h.mu.Unlock()
}

// At is args[i], undefined past the end.
func At(args []js.Value, i int) js.Value {
	if i < len(args) {
		return args[i]
	}
	return js.Undefined()
}

// ArgOf reads a JavaScript value for the native validators in args.go.
func ArgOf(v js.Value) Arg {
	t, ok := jsglue.TypeOf(v)
	if !ok {
		return Arg{Kind: KindBigInt} // the only value syscall/js cannot type
	}
	switch t {
	case js.TypeUndefined:
		return Arg{Kind: KindUndefined}
	case js.TypeNull:
		return Arg{Kind: KindNull}
	case js.TypeBoolean:
		if v.Bool() {
			return Arg{Kind: KindBoolean, Num: 1}
		}
		return Arg{Kind: KindBoolean}
	case js.TypeNumber:
		return Arg{Kind: KindNumber, Num: v.Float()}
	case js.TypeString:
		return Arg{Kind: KindString, Str: v.String()}
	case js.TypeSymbol:
		return Arg{Kind: KindSymbol}
	case js.TypeFunction:
		return Arg{Kind: KindFunction}
	}
	return Arg{Kind: KindObject}
}

// IsType reports whether v has type t (false for a BigInt).
func IsType(v js.Value, t js.Type) bool {
	vt, ok := jsglue.TypeOf(v)
	return ok && vt == t
}

// Field is jsglue.Field: obj[name], undefined when it cannot be read.
func Field(obj js.Value, name string) js.Value { return jsglue.Field(obj, name) }

// CallLater calls a user callback in a microtask, never from Go directly:
// an exception it throws is reported like any uncaught error instead of
// unwinding into Go, and a callback that calls back into the API (resign in
// onLost) does not re-enter Go while Go holds a lock.
func CallLater(fn js.Value, args ...any) {
	if fn.Type() != js.TypeFunction {
		return
	}
	b := fn.Call("bind", append([]any{nil}, args...)...)
	jsQueueMicrotask.Invoke(b)
}

// jsQueueMicrotask is called with Invoke (this undefined, which Web IDL
// operations of the global scope accept): no method name to decode.
var jsQueueMicrotask = js.Global().Get("queueMicrotask")

func ReportError(msg string, err error) {
	JSConsole.Call("error", msg, jsglue.ToJS(err))
}

// ReportPanic logs a panic recovered in a callback: the call returns
// undefined (or its promise rejects) and the runtime carries on, so the
// message is the only trace of the bug.
func ReportPanic(r any) {
	js.Global().Get("console").Call("error", "tabfence: recovered panic in a callback:", panicString(r))
}

func panicString(r any) string {
	switch v := r.(type) {
	case string:
		return v
	case error:
		return v.Error()
	}
	return "non-error panic value"
}
