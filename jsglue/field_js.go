//go:build js && wasm

package jsglue

import "syscall/js"

// Readers of values another script made, which may be anything: a BigInt,
// a Proxy whose traps throw, an array that lies about its length. None of
// them panics or runs unbounded.

// TypeOf is v.Type() without its panic: syscall/js has no BigInt type and
// panics on one ("bad type flag"); ok is false for a BigInt.
func TypeOf(v js.Value) (t js.Type, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return v.Type(), true
}

// Field reads obj[name], or undefined when obj has no properties or a
// getter or Proxy trap throws (see Get for why through Reflect.get).
func Field(obj js.Value, name string) js.Value {
	if t, ok := TypeOf(obj); !ok || (t != js.TypeObject && t != js.TypeFunction) {
		return js.Undefined()
	}
	v, err := Call(jsReflect, "get", obj, name)
	if err != nil {
		return js.Undefined()
	}
	return v
}

// IsArray is Array.isArray(v).
func IsArray(v js.Value) bool {
	r, err := Call(jsArray, "isArray", v)
	return err == nil && r.Type() == js.TypeBoolean && r.Bool()
}

var jsArray = js.Global().Get("Array")

// Len reads an array's length without trusting it (a Proxy can lie):
// 0 unless a non-negative number, at most 1<<20.
func Len(v js.Value) int {
	n := Field(v, "length")
	if n.Type() != js.TypeNumber {
		return 0
	}
	f := n.Float()
	if f != f || f < 0 {
		return 0
	}
	return int(min(f, 1<<20))
}

// Index reads v[i], undefined when a trap throws.
func Index(v js.Value, i int) js.Value {
	r, err := Call(jsReflect, "get", v, i)
	if err != nil {
		return js.Undefined()
	}
	return r
}
