package receiver

import (
	"context"
	"net/http"
	"unicode/utf8"

	"github.com/tabfence/tabfence/wire"
)

// Mutation is a command that reaches the server other than as its own HTTP
// request, such as a message on a realtime connection. Apply runs it with
// the same guarantees Handle gives a request.
type Mutation struct {
	// Scope is the authenticated user, from the connection's handshake.
	Scope string
	// Key is the idempotency key: the same key space as Handle's, so a
	// command sent once over HTTP and again here is applied once (the
	// fingerprints must then agree, see Target).
	Key string
	// Target names the command for the key's fingerprint (Handle uses the
	// method and path); with Scope and Body it is what a reused key is
	// compared against.
	Target string
	Body   []byte
	// Resource and Token are the sender's fencing token, both or neither.
	Resource string
	Token    uint64
	// OperationID is for tracing only.
	OperationID string
	// HTTP is the request that opened the connection, for handlers that
	// read it (nil when there is none).
	HTTP *http.Request
}

// Apply runs m through the key's record and the fence as Handle runs a
// request, and returns the answer a request would get: the handler's (run
// now in the transaction that stores it), a replay with Idempotent-Replayed
// set, or a problem (malformed key or fence 400, body 413 or 422, stale
// token 409, in flight 409, failure 500). The work is detached from ctx's
// cancellation and bounded by Options.Timeout, as Handle's is.
func (rc *Receiver) Apply(ctx context.Context, m Mutation, h Handler) Response {
	if m.Scope == "" || !ValidText(m.Scope) {
		return ProblemResponse(probUnauthenticated)
	}
	if !wire.ValidKey(m.Key) {
		return ProblemResponse(probMalformedKey)
	}
	if (m.Resource == "") != (m.Token == 0) || m.Resource != "" && !wire.ValidResource(m.Resource) || m.Token > wire.MaxToken {
		p := probMalformedToken
		p.Detail = "Send a valid resource and a token in 1..2^53-1 together, or neither."
		return ProblemResponse(p)
	}
	if int64(len(m.Body)) > rc.opts.MaxBody {
		return ProblemResponse(probTooLarge)
	}
	if rc.opts.RejectInvalidUTF8 && !utf8.Valid(m.Body) {
		return ProblemResponse(probInvalidUTF8)
	}
	req := &Request{HTTP: m.HTTP, Scope: m.Scope, Key: m.Key, Body: m.Body, Resource: m.Resource, Token: m.Token, OperationID: m.OperationID}
	return rc.apply(ctx, "APPLY", m.Target, req, h)
}

// Options returns the receiver's options with their defaults filled in, for
// endpoints built on it (they authenticate with the same Scope).
func (rc *Receiver) Options() Options { return rc.opts }
