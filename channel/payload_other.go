//go:build !(js && wasm)

package channel

// Payload is opaque outside the browser.
type Payload = any
