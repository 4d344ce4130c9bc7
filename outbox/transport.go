package outbox

import (
	"context"

	"github.com/tabfence/tabfence/wire"
)

// Header is a small case-insensitive header set (wire.Header).
type Header = wire.Header

// Request is one send. Header carries, from the wire contract:
// Idempotency-Key (wire.FormatIdempotencyKey), X-Client-Operation-Id,
// X-Client-Resource and X-Client-Fencing-Token. A batch request (to
// Config.BatchEndpoint) has no Idempotency-Key, operation id or RecordID:
// its body carries each mutation's key. The Transport adds credentials and
// the content type; nothing secret is ever in a Record.
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

// Resolver is a Transport that sends an Endpoint that is a path elsewhere
// than that path of the page's origin (fetch.Transport's BaseURL): Resolve
// is where it goes. The batch flush resolves a record's endpoint and the
// batch endpoint alike, so a mutation names the path its single request
// reaches (wire.BatchPath), one key one fingerprint either way.
type Resolver interface {
	Resolve(endpoint string) string
}
