package wire

import (
	"errors"
	"strconv"
	"time"
	"unicode/utf8"
)

// The batch format: one POST carries an ordered list of mutations, each with
// its own idempotency key, and the answer a result per mutation. The fencing
// token and the user travel in the request's headers, as for one mutation;
// the batch itself has no Idempotency-Key.
//
//	request:  {"mutations":[{"key":..,"endpoint":..,"id":..,"op":..,"entity":..,"payload":..}]}
//	response: {"results":[{"key":..,"outcome":..,"status":..,"body":..,"problem":..,"retryAfter":<seconds>}]}
//
// payload and body carry bytes: a JSON object, array, number, true, false
// or null stands for its own text; a JSON string stands for the bytes of
// the text it holds. So a JSON answer is embedded as is and any other
// answer (plain text, or a JSON string) travels as a string, and both come
// back byte for byte (invalid UTF-8 becomes U+FFFD). An empty one is left
// out. The codec is written by hand (no encoding/json: the runtime's
// download size) and bounded: strings are copied once, nesting is at most
// maxDepth deep.

// BatchMutation is one mutation of a batch, in the order the client sends
// them.
type BatchMutation struct {
	Key string // idempotency key (same syntax as the Idempotency-Key header's, unquoted)
	// Endpoint is the path (and query) the mutation would be POSTed to
	// alone. The receiver binds the key to it as it binds a single
	// request's key to its target, so a record sent alone or in a batch
	// under one key is the same mutation. Required (ValidEndpoint).
	Endpoint    string
	OperationID string // the record's id, for tracing
	Operation   string // operation type
	Entity      string // the ordering key: later mutations of a failed mutation's Entity are not attempted
	Payload     []byte // the mutation's body
}

// BatchOutcome is what became of one mutation of a batch.
type BatchOutcome string

// The outcomes of a batch's mutations.
const (
	BatchApplied      BatchOutcome = "applied"       // ran now; Status/Body are the handler's (2xx)
	BatchReplayed     BatchOutcome = "replayed"      // finished before: the stored Status/Body
	BatchRejected     BatchOutcome = "rejected"      // a 4xx: the handler's is stored and replayed like a single request's; the protocol's (key reuse 422) is not stored
	BatchNotAttempted BatchOutcome = "not-attempted" // an earlier mutation of its Entity in this batch did not succeed
	BatchRetry        BatchOutcome = "retry"         // the mutation's 5xx, its key in flight elsewhere, or the batch out of time: not stored; RetryAfter may be set
)

// BatchResult is the answer to one mutation of a batch.
type BatchResult struct {
	Key        string
	Outcome    BatchOutcome
	Status     int           // the HTTP status this mutation would have had alone (0 for not-attempted)
	Body       []byte        // the handler's answer
	Problem    string        // the problem type URI of a protocol rejection, else ""
	RetryAfter time.Duration // for retry, when the server asks for a delay (whole seconds on the wire)
}

// Problem types of a refused batch.
const (
	ProblemBatchTooLarge  = ProblemBase + "batch-too-large" // 413: more mutations than the server's limit
	ProblemBatchMalformed = ProblemBase + "batch-malformed" // 400: the body is not a batch document
)

// Errors of the batch parsers. Use errors.Is.
var (
	ErrBatchMalformed = errors.New("wire: batch malformed")
	ErrBatchTooLarge  = errors.New("wire: batch has too many mutations")
)

// maxDepth bounds the nesting of a payload or body, so a hostile document
// cannot make the scanner recurse without end.
const maxDepth = 64

// maxStatus is the largest status accepted in a result.
const maxStatus = 999

// AppendBatchRequest appends the request document of ms to b.
func AppendBatchRequest(b []byte, ms []BatchMutation) []byte {
	b = append(b, `{"mutations":[`...)
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendString(b, m.Key)
		b = appendMember(b, "endpoint", m.Endpoint)
		b = appendMember(b, "id", m.OperationID)
		b = appendMember(b, "op", m.Operation)
		b = appendMember(b, "entity", m.Entity)
		if len(m.Payload) > 0 {
			b = append(b, `,"payload":`...)
			b = appendBytes(b, m.Payload)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// AppendBatchResponse appends the response document of rs to b.
func AppendBatchResponse(b []byte, rs []BatchResult) []byte {
	b = append(b, `{"results":[`...)
	for i, r := range rs {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendBatchResult(b, r)
	}
	return append(b, "]}"...)
}

// AppendBatchResult appends r as one element of a response document's
// results, so a server can measure its answer as it grows.
func AppendBatchResult(b []byte, r BatchResult) []byte {
	b = append(b, `{"key":`...)
	b = appendString(b, r.Key)
	b = appendMember(b, "outcome", string(r.Outcome))
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	if len(r.Body) > 0 {
		b = append(b, `,"body":`...)
		b = appendBytes(b, r.Body)
	}
	if r.Problem != "" {
		b = appendMember(b, "problem", r.Problem)
	}
	if r.RetryAfter > 0 {
		secs := (min(r.RetryAfter, MaxRetryAfter) + time.Second - 1) / time.Second
		b = append(b, `,"retryAfter":`...)
		b = strconv.AppendInt(b, int64(secs), 10)
	}
	return append(b, '}')
}

// ParseBatchRequest parses a request document of at most max mutations.
// Keys must be valid idempotency keys, each once, and endpoints valid
// (ValidEndpoint). The payloads alias body.
// Unknown members are skipped, for later versions of the format. Errors
// wrap ErrBatchMalformed or ErrBatchTooLarge.
func ParseBatchRequest(body []byte, max int) ([]BatchMutation, error) {
	s := scanner{b: body}
	var ms []BatchMutation
	var seen map[string]bool
	tooLarge := false
	found := s.document("mutations", func() bool {
		if len(ms) >= max {
			tooLarge = true
			return false
		}
		m, ok := s.mutation()
		if !ok || !ValidKey(m.Key) || !ValidEndpoint(m.Endpoint) || seen[m.Key] {
			return false
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[m.Key] = true
		ms = append(ms, m)
		return true
	})
	switch {
	case tooLarge:
		return nil, ErrBatchTooLarge
	case !found:
		return nil, ErrBatchMalformed
	}
	return ms, nil
}

// ParseBatchResponse parses a response document that must hold one result
// per sent key, in the order sent. Errors wrap ErrBatchMalformed.
func ParseBatchResponse(body []byte, keys []string) ([]BatchResult, error) {
	s := scanner{b: body}
	rs := make([]BatchResult, 0, len(keys))
	found := s.document("results", func() bool {
		if len(rs) == len(keys) {
			return false
		}
		r, ok := s.result()
		if !ok || r.Key != keys[len(rs)] {
			return false
		}
		rs = append(rs, r)
		return true
	})
	if !found || len(rs) != len(keys) {
		return nil, ErrBatchMalformed
	}
	return rs, nil
}

// MaxEndpoint is the longest endpoint a batch mutation may name.
const MaxEndpoint = 2048

// ValidEndpoint reports whether e can be a mutation's endpoint: an
// origin-relative path with an optional query ("/api/notes?x=1"), at most
// MaxEndpoint bytes of printable ASCII without spaces or a fragment, not
// starting with "//" (which would name another host).
func ValidEndpoint(e string) bool {
	if len(e) == 0 || len(e) > MaxEndpoint || e[0] != '/' || (len(e) > 1 && e[1] == '/') {
		return false
	}
	for i := 0; i < len(e); i++ {
		if c := e[i]; c <= ' ' || c > '~' || c == '#' {
			return false
		}
	}
	return true
}

func appendMember(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

// BatchSafe reports whether p travels in a batch document byte for byte,
// as a payload or a body: a JSON value goes as is, any other bytes as a
// JSON string, which holds only UTF-8 (other bytes would arrive as U+FFFD,
// another payload under the same key). A payload that is not safe must be
// sent alone, as the request's own body.
func BatchSafe(p []byte) bool { return verbatim(p) || utf8.Valid(p) }

// verbatim reports whether p goes in a batch document as itself: a JSON
// value other than a string, without white space around it (which a
// parser would drop).
func verbatim(p []byte) bool {
	if len(p) == 0 || p[0] == '"' || isJSONSpace(p[0]) || isJSONSpace(p[len(p)-1]) {
		return false
	}
	s := scanner{b: p}
	return s.value(1) && s.i == len(p)
}

// appendBytes appends p as a payload or body member's value: p itself when
// verbatim, else p's text as a JSON string (BatchSafe says when that loses
// nothing).
func appendBytes(b, p []byte) []byte {
	if verbatim(p) {
		return append(b, p...)
	}
	return appendString(b, string(p))
}

// appendString appends s as a JSON string: '"', '\' and control characters
// escaped, invalid UTF-8 as U+FFFD, everything else as is.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		case c < utf8.RuneSelf:
			b = append(b, c)
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, "\ufffd"...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		i++
	}
	return append(b, '"')
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
