package receiver

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/http"

	"github.com/tabfence/tabfence/wire"
)

// Request is what a business handler sees: the original HTTP request (its
// body already read into Body) and the parsed protocol headers. Under
// HandleBatch, HTTP is the batch's request (its method, URL, path values),
// shared by all its mutations; Endpoint names the mutation's own target.
type Request struct {
	HTTP        *http.Request
	Scope       string // the authenticated user/tenant, from Options.Scope
	Key         string // the idempotency key, unquoted
	Body        []byte
	Resource    string // fenced resource, "" when the request is not fenced
	Token       uint64 // accepted fencing token, 0 when not fenced
	OperationID string // X-Client-Operation-Id (a batch: the mutation's id), for tracing only
	// Operation and Entity are a batch mutation's operation type and
	// ordering key (see HandleBatch); "" for a single request.
	Operation string
	Entity    string
	// Endpoint is the path (and query) a batch mutation would have been
	// POSTed to alone; "" for a single request (see HTTP.URL).
	Endpoint string
}

// Response is what a business handler answers. 2xx and 4xx answers are
// stored and replayed; 5xx answers are sent but not stored, so a retry runs
// the handler again.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Errors describing why a request's protocol headers were rejected.
var (
	ErrFencePartial = errors.New("receiver: only one of X-Client-Resource and X-Client-Fencing-Token sent")
)

// headers are the protocol headers of a mutation, parsed and validated.
type headers struct {
	key      string
	resource string
	token    uint64
	opID     string
}

// parseHeaders validates the protocol headers without touching the store.
// Its errors wrap the wire package's errors (errors.Is works).
func parseHeaders(h http.Header) (headers, error) {
	var out headers
	keys := h.Values(wire.HeaderIdempotencyKey)
	if len(keys) > 1 {
		return out, wire.ErrKeyMalformed
	}
	k, err := wire.ParseIdempotencyKey(h.Get(wire.HeaderIdempotencyKey))
	if len(keys) == 1 && errors.Is(err, wire.ErrKeyMissing) {
		return out, wire.ErrKeyMalformed // sent, but empty: malformed, as the README says
	}
	if err != nil {
		return out, err
	}
	out.key = k
	if out.resource, out.token, err = parseFence(h); err != nil {
		return out, err
	}
	out.opID = operationID(h.Get(wire.HeaderOperationID))
	return out, nil
}

// operationID is a client's operation id if it is safe to log (a valid
// key's alphabet and length), else "".
func operationID(op string) string {
	if wire.ValidKey(op) {
		return op
	}
	return ""
}

// parseFence validates the fencing headers, both or neither.
func parseFence(h http.Header) (resource string, token uint64, err error) {
	res, tok := h.Values(wire.HeaderResource), h.Values(wire.HeaderFencingToken)
	switch {
	case len(res) == 0 && len(tok) == 0:
		return "", 0, nil
	case len(res) != 1 || len(tok) != 1:
		if len(res) > 1 || len(tok) > 1 {
			return "", 0, wire.ErrTokenMalformed
		}
		return "", 0, ErrFencePartial
	}
	if !wire.ValidResource(res[0]) {
		return "", 0, wire.ErrResourceMalformed
	}
	t, err := wire.ParseToken(tok[0])
	if err != nil {
		return "", 0, err
	}
	return res[0], t, nil
}

// fingerprint binds a key to the request it was first used with: method,
// path (with the query, when there is one), scope and body, each length-prefixed so no two requests collide by
// concatenation.
func fingerprint(method, path, scope string, body []byte) string {
	return hashParts([]byte(method), []byte(path), []byte(scope), body)
}

// mutationFingerprint binds a batch mutation's key exactly as the single
// POST to its endpoint would bind it, so that a record sent alone and then
// in a batch (or the reverse) under one key is replayed, never refused as
// a reused key, whatever route the batch came by. The operation type is
// not part of it: a single request has none, its endpoint stands for it.
func mutationFingerprint(scope string, m wire.BatchMutation) string {
	return fingerprint(http.MethodPost, m.Endpoint, scope, m.Payload)
}

// hashParts is the hex SHA-256 of the parts, each length-prefixed.
func hashParts(parts ...[]byte) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Fingerprint is the payload fingerprint the receiver stores with a key
// (hex SHA-256 over method, path, scope and body). Exported for tools and
// tests that inspect the store.
func Fingerprint(method, path, scope string, body []byte) string {
	return fingerprint(method, path, scope, body)
}
