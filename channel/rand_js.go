//go:build js && wasm

package channel

import "syscall/js"

var (
	jsCrypto     = js.Global().Get("crypto")
	jsUint8Array = js.Global().Get("Uint8Array")
)

// randomBytes fills b from crypto.getRandomValues, the browser's CSPRNG.
func randomBytes(b []byte) {
	a := jsUint8Array.New(len(b))
	jsCrypto.Call("getRandomValues", a)
	js.CopyBytesToGo(b, a)
}
