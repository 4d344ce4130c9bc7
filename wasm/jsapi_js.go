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
// Go callback each: every method is a shared callback bound to the
// instance's handle number (Function.prototype.bind prepends it), and a
// handle that is gone behaves as closed. So the count of live callbacks does
// not grow with the number of elections.

var (
	symAsync  = js.Global().Get("Symbol").Call("for", "tabfence.async")
	symThrow  = js.Global().Get("Symbol").Call("for", "tabfence.throw")
	jsObject  = js.Global().Get("Object")
	jsReflect = js.Global().Get("Reflect")
)

func newObject() js.Value { return jsObject.New() }

// errInternal is what a panic in a synchronous method becomes.
var errInternal = errors.New("tabfence: internal error (see the console)")

// syncFunc exports fn; its error is thrown by the loader.
func syncFunc(fn func(args []js.Value) (any, error)) *jsglue.Callback {
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

// asyncFunc exports fn as a function returning a Promise; fn runs on its own
// goroutine, so it may block (await a lock, a fetch) without freezing the
// JavaScript event loop.
func asyncFunc(fn func(args []js.Value) (any, error)) *jsglue.Callback {
	cb := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
		return jsglue.Async(func() (any, error) { return fn(args) })
	})
	jsReflect.Call("set", cb.Value, symAsync, true)
	return cb
}

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

// bound returns cb bound to a handle: JavaScript calls it with its own
// arguments and Go receives the handle first.
func bound(cb *jsglue.Callback, handle float64) js.Value {
	f := cb.Value.Call("bind", nil, handle)
	if jsReflect.Call("get", cb.Value, symAsync).Truthy() {
		jsReflect.Call("set", f, symAsync, true) // bind drops own properties
	}
	return f
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

// typeOf is v.Type() without its panic: syscall/js has no BigInt type and
// panics on one ("bad type flag"), and a page can pass anything.
func typeOf(v js.Value) (t js.Type, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return v.Type(), true
}

// argOf reads a JavaScript value for the native validators in args.go.
func argOf(v js.Value) arg {
	t, ok := typeOf(v)
	if !ok {
		return arg{Kind: kindBigInt} // the only value syscall/js cannot type
	}
	switch t {
	case js.TypeUndefined:
		return arg{Kind: kindUndefined}
	case js.TypeNull:
		return arg{Kind: kindNull}
	case js.TypeBoolean:
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

// field reads obj[name] without killing the runtime: a getter or Proxy
// trap that throws reads as undefined. It goes through Reflect.get with
// Call, not obj.Get: wasm_exec.js's valueGet has no try/catch, so an
// exception there unwinds through the Go stack and ends the program, while
// valueCall turns it into a panic that jsglue.Try recovers.
func field(obj js.Value, name string) js.Value {
	if t, ok := typeOf(obj); !ok || (t != js.TypeObject && t != js.TypeFunction) {
		return js.Undefined()
	}
	v, err := jsglue.Call(jsReflect, "get", obj, name)
	if err != nil {
		return js.Undefined()
	}
	return v
}

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

// recurring maps the strings that recur in message after message (kinds,
// resources, owner IDs) to JavaScript strings made once: each js.ValueOf
// of a Go string decodes it in JavaScript and registers a new reference
// (with a Go finalizer), which the message path would otherwise pay per
// field per message.
var recurring strCache

type strCache struct {
	mu   sync.Mutex
	ents [16]struct {
		s string
		v js.Value
	}
	next int
}

// lookup returns the Go string of v when v is a JavaScript string in the
// cache: wasm_exec.js gives equal strings the same reference while one is
// held, so the comparison is Go-side only — no copy of v into Go.
func (c *strCache) lookup(v js.Value) (string, bool) {
	s, ok := "", false
	c.mu.Lock()
	for i := range c.ents {
		if e := &c.ents[i]; e.v.Type() == js.TypeString && e.v.Equal(v) {
			s, ok = e.s, true
			break
		}
	}
	c.mu.Unlock()
	return s, ok
}

// get returns s as a JavaScript string. Strings over 256 bytes are not
// kept.
func (c *strCache) get(s string) js.Value {
	c.mu.Lock()
	for i := range c.ents {
		if e := &c.ents[i]; e.s == s && e.v.Type() == js.TypeString {
			c.mu.Unlock()
			return e.v
		}
	}
	v := js.ValueOf(s)
	if len(s) <= 256 {
		c.ents[c.next].s, c.ents[c.next].v = s, v
		c.next = (c.next + 1) % len(c.ents)
	}
	c.mu.Unlock()
	return v
}
