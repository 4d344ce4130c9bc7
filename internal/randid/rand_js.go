//go:build js && wasm

package randid

import (
	"syscall/js"
	"time"
)

var (
	jsCrypto     = js.Global().Get("crypto")
	jsUint8Array = js.Global().Get("Uint8Array")
)

// Read fills b from crypto.getRandomValues, the browser's CSPRNG. Where Web
// Crypto is missing (never in a secure context, which Web Locks and the
// runtime require anyway) it falls back to a clock-seeded generator: the
// identifiers must be unique, not secret.
func Read(b []byte) {
	if jsCrypto.Type() == js.TypeObject {
		a := jsUint8Array.New(len(b))
		jsCrypto.Call("getRandomValues", a)
		js.CopyBytesToGo(b, a)
		return
	}
	n := uint64(time.Now().UnixNano())
	for i := range b {
		n = n*6364136223846793005 + 1442695040888963407
		b[i] = byte(n >> 56)
	}
}
