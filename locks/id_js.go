//go:build js && wasm

package locks

import (
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/jsglue"
)

func randomBytes(b []byte) {
	_, err := jsglue.Try(func() int {
		a := js.Global().Get("Uint8Array").New(len(b))
		js.Global().Get("crypto").Call("getRandomValues", a)
		return js.CopyBytesToGo(b, a)
	})
	if err != nil { // no Web Crypto: the id need only be unique, not secret
		n := uint64(time.Now().UnixNano())
		for i := range b {
			n = n*6364136223846793005 + 1442695040888963407
			b[i] = byte(n >> 56)
		}
	}
}
