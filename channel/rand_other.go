//go:build !(js && wasm)

package channel

import "crypto/rand"

func randomBytes(b []byte) { _, _ = rand.Read(b) } // never fails since Go 1.24
