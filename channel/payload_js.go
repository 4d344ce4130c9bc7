//go:build js && wasm

package channel

import "syscall/js"

// Payload is the structured-cloneable JavaScript value a message carries,
// kept as is: no JSON round trip.
type Payload = js.Value
