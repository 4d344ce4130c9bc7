//go:build js && wasm

package main

import "github.com/tabfence/tabfence/wasm/jsapi"

// objects is one kind of API object of the page (jsapi.Objects): package
// state because the objects are the page's, handed to its JavaScript by
// the one runtime the page runs.
type objects[T any] struct{ jsapi.Objects[T] }

// lookup is Lookup under the name export_js.go calls.
func (o *objects[T]) lookup(id float64) (T, bool) { return o.Lookup(id) }

// The names export_js.go uses for jsapi's.
var (
	jsReflect   = jsapi.JSReflect
	jsPromise   = jsapi.JSPromise
	symAsync    = jsapi.SymAsync
	errInternal = jsapi.ErrInternal
)

func checkedString(where, field, s string) (string, error) {
	return jsapi.CheckedString(where, field, s)
}
