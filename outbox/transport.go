package outbox

import (
	"context"
)

// Header is a small case-insensitive header set (fetch reports lowercase
// names, wire uses canonical ones). Set keeps one value per name.
type Header map[string]string

// Get returns the value of name, compared case-insensitively.
func (h Header) Get(name string) string {
	if v, ok := h[name]; ok {
		return v
	}
	for k, v := range h {
		if equalFoldASCII(k, name) {
			return v
		}
	}
	return ""
}

// equalFoldASCII compares header names case-insensitively. Field names are
// ASCII tokens (RFC 9110 §5.1), so ASCII folding is exact; strings.EqualFold
// would link Unicode case tables into the wasm download for nothing.
func equalFoldASCII(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// Request is one send. Header carries, from the wire contract:
// Idempotency-Key (wire.FormatIdempotencyKey), X-Client-Operation-Id,
// X-Client-Resource and X-Client-Fencing-Token. The Transport adds
// credentials and the content type; nothing secret is ever in a Record.
type Request struct {
	Method   string // always POST
	Endpoint string // path or URL, from the Policy or the Outbox default
	Header   Header
	Body     []byte
	RecordID string
	UserID   string // the session the request is sent for
}

// Response is the receiver's answer. Status 0 is never valid here: a request
// that got no answer is reported as an error from Send.
type Response struct {
	Status int
	Header Header
	Body   []byte
}

// Transport sends one request. An error means no HTTP answer arrived
// (network failure, timeout, abort): the outbox retries it.
type Transport interface {
	Send(ctx context.Context, req Request) (Response, error)
}

// TransportFunc adapts a function to Transport.
type TransportFunc func(ctx context.Context, req Request) (Response, error)

// Send calls f.
func (f TransportFunc) Send(ctx context.Context, req Request) (Response, error) { return f(ctx, req) }
