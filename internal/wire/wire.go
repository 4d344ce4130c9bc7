// Package wire is the HTTP contract between the browser outbox and the server
// receiver: header names, idempotency-key syntax, fencing-token syntax, problem
// types and Retry-After parsing. Both sides import it so they cannot drift.
//
// It is compiled into tabfence.wasm, so it deliberately avoids fmt, net/http
// and encoding/json: every byte here is downloaded by every user.
package wire

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Header names. Go canonical form; HTTP header names are case-insensitive.
const (
	// HeaderIdempotencyKey carries the client's key for one submitted command
	// (IETF httpapi Idempotency-Key draft). Sent as an sf-string.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on a response replayed from the store.
	HeaderReplayed = "Idempotent-Replayed"
	// HeaderOperationID is the outbox record's immutable local id, for tracing.
	HeaderOperationID = "X-Client-Operation-Id"
	// HeaderResource names the fenced resource the sender leads.
	HeaderResource = "X-Client-Resource"
	// HeaderFencingToken is the sender's server-issued fencing token.
	HeaderFencingToken = "X-Client-Fencing-Token"
	// HeaderFencingHighest is the highest token the server accepted for the
	// resource; sent with a stale-token rejection so the client can step down.
	HeaderFencingHighest = "X-Fencing-Highest"
	// HeaderRetryAfter is the standard Retry-After header.
	HeaderRetryAfter = "Retry-After"
)

// Problem types (RFC 9457 "type" members) the receiver answers with.
// Clients branch on these, never on the human-readable title.
const (
	ProblemBase            = "https://tabfence.dev/problems/"
	ProblemMissingKey      = ProblemBase + "idempotency-key-missing"
	ProblemMalformedKey    = ProblemBase + "idempotency-key-malformed"
	ProblemKeyReuse        = ProblemBase + "idempotency-key-reused" // same key, other payload: 422
	ProblemInFlight        = ProblemBase + "request-in-flight"      // same key still running: 409
	ProblemStaleToken      = ProblemBase + "stale-fencing-token"    // 409, step down
	ProblemForgedToken     = ProblemBase + "unissued-fencing-token" // 400
	ProblemMalformedToken  = ProblemBase + "fencing-token-malformed"
	ProblemUnauthenticated = ProblemBase + "unauthenticated"
	ProblemBodyTooLarge    = ProblemBase + "body-too-large"
	ProblemConflict        = ProblemBase + "conflict" // business conflict: 409 without fencing-highest
	ProblemInternal        = ProblemBase + "internal"
	ContentTypeProblem     = "application/problem+json"
	MaxKeyLen              = 255
	MaxResourceLen         = 200
)

// Errors returned by the parsers. Use errors.Is.
var (
	ErrKeyMissing        = errors.New("wire: idempotency key missing")
	ErrKeyMalformed      = errors.New("wire: idempotency key malformed")
	ErrTokenMalformed    = errors.New("wire: fencing token malformed")
	ErrResourceMalformed = errors.New("wire: resource name malformed")
)

// ValidKey reports whether k may be used as an idempotency key: 1..255
// printable ASCII characters other than '"' and '\'. The alphabet is kept to
// what survives both sf-string and bare-token encodings unchanged, so a key
// means the same thing whichever form a client sends.
func ValidKey(k string) bool {
	if len(k) == 0 || len(k) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// ParseIdempotencyKey parses an Idempotency-Key header value. The draft
// specifies an sf-string ("abc"); bare tokens (abc) are accepted too because
// many clients send them. Surrounding whitespace is ignored.
func ParseIdempotencyKey(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", ErrKeyMissing
	}
	if v[0] == '"' {
		if len(v) < 2 || v[len(v)-1] != '"' {
			return "", ErrKeyMalformed
		}
		v = v[1 : len(v)-1]
	}
	if !ValidKey(v) {
		return "", ErrKeyMalformed
	}
	return v, nil
}

// FormatIdempotencyKey renders a valid key as the draft's sf-string.
func FormatIdempotencyKey(k string) string { return `"` + k + `"` }

// ValidResource reports whether r may name a fenced resource: 1..200 bytes of
// letters, digits and -_.:/@ (no spaces, quotes or control characters, so it
// is safe in a header, a URL path segment and a log line).
func ValidResource(r string) bool {
	if len(r) == 0 || len(r) > MaxResourceLen {
		return false
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == ':' || c == '/' || c == '@':
		default:
			return false
		}
	}
	return true
}

// ParseToken parses a fencing token: a decimal integer in 1..2^53-1 (the
// range a JavaScript number holds exactly), without sign or leading zeros.
func ParseToken(v string) (uint64, error) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 16 || v[0] == '0' {
		return 0, ErrTokenMalformed
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, ErrTokenMalformed
		}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > MaxToken {
		return 0, ErrTokenMalformed
	}
	return n, nil
}

// MaxToken is the largest fencing token: 2^53-1, exact in JavaScript.
const MaxToken = 1<<53 - 1

// FormatToken renders a token for a header.
func FormatToken(t uint64) string { return strconv.FormatUint(t, 10) }

// httpDateLayouts are the three forms RFC 9110 requires recipients to accept.
var httpDateLayouts = [...]string{
	"Mon, 02 Jan 2006 15:04:05 GMT",  // IMF-fixdate
	"Monday, 02-Jan-06 15:04:05 GMT", // obsolete RFC 850
	"Mon Jan _2 15:04:05 2006",       // ANSI C asctime
}

// MaxRetryAfter caps what a server can make a client wait, so a hostile or
// broken Retry-After cannot park the queue for days.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter parses Retry-After in either form (delay-seconds or
// HTTP-date) relative to now. ok is false when the header is absent or
// malformed; a date in the past yields 0. The result is capped at MaxRetryAfter.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			if len(v) > 0 && isDigits(v) { // overflow: treat as "very long"
				return MaxRetryAfter, true
			}
			return 0, false
		}
		if n > uint64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	for _, layout := range httpDateLayouts {
		t, err := time.Parse(layout, v)
		if err != nil {
			continue
		}
		d = t.Sub(now)
		if d < 0 {
			d = 0
		}
		if d > MaxRetryAfter {
			d = MaxRetryAfter
		}
		return d, true
	}
	return 0, false
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Outcome classifies an HTTP answer for the outbox. The receiver's status
// codes are chosen so this table is the whole client-side policy.
type Outcome int

const (
	OutcomeAck      Outcome = iota + 1 // 2xx: done, keep the response
	OutcomeRetry                       // 408, 425, 429, 5xx, network error
	OutcomeAuth                        // 401: pause, ask the app to re-authenticate
	OutcomeTerminal                    // 400, 403, 404, 413, 422 and other 4xx
	OutcomeStale                       // 409 with X-Fencing-Highest: step down
	OutcomeConflict                    // 409 without it: business conflict
)

// String names the outcome for logs and events.
func (o Outcome) String() string {
	switch o {
	case OutcomeAck:
		return "ack"
	case OutcomeRetry:
		return "retry"
	case OutcomeAuth:
		return "auth"
	case OutcomeTerminal:
		return "terminal"
	case OutcomeStale:
		return "stale"
	case OutcomeConflict:
		return "conflict"
	}
	return "unknown"
}

// Classify maps a status code (0 for a network error) and whether the
// response carried X-Fencing-Highest to an Outcome.
func Classify(status int, hasFencingHighest bool) Outcome {
	switch {
	case status == 0:
		return OutcomeRetry
	case status >= 200 && status < 300:
		return OutcomeAck
	case status == 401:
		return OutcomeAuth
	case status == 409 && hasFencingHighest:
		return OutcomeStale
	case status == 409:
		return OutcomeConflict
	case status == 408 || status == 425 || status == 429 || status >= 500:
		return OutcomeRetry
	default:
		return OutcomeTerminal
	}
}
