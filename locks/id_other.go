//go:build !(js && wasm)

package locks

import "crypto/rand"

func randomBytes(b []byte) { _, _ = rand.Read(b) } // never fails (Go 1.24+)
