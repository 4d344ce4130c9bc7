//go:build !(js && wasm)

package randid

import "crypto/rand"

// Read fills b from crypto/rand (which never fails since Go 1.24).
func Read(b []byte) { _, _ = rand.Read(b) }
