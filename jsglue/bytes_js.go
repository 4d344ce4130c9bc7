//go:build js && wasm

package jsglue

import "syscall/js"

var jsUint8Array = js.Global().Get("Uint8Array")

// Bytes is a new Uint8Array holding a copy of b.
func Bytes(b []byte) js.Value {
	a := jsUint8Array.New(len(b))
	if len(b) > 0 {
		js.CopyBytesToJS(a, b)
	}
	return a
}
