//go:build js && wasm

package loader

import (
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

// The loader installs its fast path under Symbol.for("tabfence.fastpath.v2")
// before the runtime starts: an object with the core's functions (attach,
// payload) and one object of functions per hook group. Every call into Go,
// and every string or object Go receives, costs a reference with a
// finalizer; the hooks let a message or an enqueue cross once, as numbers
// and one text, instead of Go reading each field. They only reshape data
// and run what must run synchronously inside a browser event (an
// IndexedDB transaction that must not yield): every decision is Go's.
// Without the loader (Go's own tests, a page that loads the .wasm itself)
// the groups are absent and every path is Go's own.
//
// The key names the layout of the object and its core: a loader whose
// object has another layout (the flat v1 of older builds) installs it
// under another key. Each group names its own layout in its layout field,
// checked by Group against the version its package speaks: the groups are
// separate files (dist/tabfence-*.js), and a cache may mix two builds'. So a
// runtime never calls hooks it does not know, and the loader's hooks are
// only called by a runtime that asks for them (version skew either way
// falls back to Go's own path, group by group).
const FastPathKey = "tabfence.fastpath.v2"

var (
	jsReflect = js.Global().Get("Reflect")
	jsFastKey = js.Global().Get("Symbol").Call("for", FastPathKey)
)

// Hooks is one hook group of the loader's fast path, or none (every
// function undefined).
type Hooks struct{ v js.Value }

// Func returns the group's function name, or undefined.
func (h Hooks) Func(name string) js.Value {
	if h.v.Type() != js.TypeObject {
		return js.Undefined()
	}
	if f, err := jsglue.Get(h.v, name); err == nil && f.Type() == js.TypeFunction {
		return f
	}
	return js.Undefined()
}

// Present reports whether the loader has this group.
func (h Hooks) Present() bool { return h.v.Type() == js.TypeObject }

// fast returns the installed fast path object, or undefined.
func fast() js.Value {
	v, err := jsglue.Call(jsReflect, "get", js.Global(), jsFastKey)
	if err != nil || v.Type() != js.TypeObject {
		return js.Undefined()
	}
	return v
}

// Group looks hook group name up (read when a channel or outbox opens, not
// per message): the group, when its layout field is layout, the version of
// the group's hooks the caller's package speaks (defined there, beside the
// Go the hooks serve); else none.
func Group(name string, layout int) Hooks {
	f := fast()
	if f.IsUndefined() {
		return Hooks{js.Undefined()}
	}
	g, err := jsglue.Get(f, name)
	if err != nil || g.Type() != js.TypeObject {
		return Hooks{js.Undefined()}
	}
	if v, err := jsglue.Get(g, "layout"); err != nil || v.Type() != js.TypeNumber || v.Float() != float64(layout) {
		return Hooks{js.Undefined()}
	}
	return Hooks{g}
}

// PayloadFunc is the core's payload(): the payload the loader is handing
// to an export, undefined without the loader (see HeldPayload).
func PayloadFunc() js.Value { return Hooks{fast()}.Func("payload") }

// HeldPayload calls payload, a PayloadFunc: the payload being handed to the
// export in progress, undefined without one.
func HeldPayload(payload js.Value) js.Value {
	if payload.IsUndefined() {
		return js.Undefined()
	}
	return payload.Invoke()
}
