// Package randid makes random identifiers (owner IDs, message IDs, record
// IDs, idempotency keys) and hex-encodes bytes.
//
// In the browser it reads crypto.getRandomValues directly: crypto/rand
// calls the same source there, but linking it (and encoding/hex, which
// imports fmt) adds well over 100 KB to the wasm download. Natively it uses
// crypto/rand.
package randid

const hexDigits = "0123456789abcdef"

// Hex returns the lowercase hex encoding of b.
func Hex(b []byte) string {
	out := make([]byte, 2*len(b))
	for i, c := range b {
		out[2*i] = hexDigits[c>>4]
		out[2*i+1] = hexDigits[c&0x0f]
	}
	return string(out)
}

// New returns a random 128-bit identifier as 32 hex characters.
func New() string {
	var b [16]byte
	Read(b[:])
	return Hex(b[:])
}
