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

// Problem types for bodies the receiver refuses before storing anything.
// Classify retries the 408 and the 503; the others are terminal.
const (
	ProblemBodyUnreadable = ProblemBase + "body-unreadable" // 400: the body ended before its length
	ProblemBodyTimeout    = ProblemBase + "body-timeout"    // 408: the body arrived too slowly
	ProblemBusy           = ProblemBase + "server-busy"     // 503 with Retry-After: too many bodies at once
	ProblemInvalidUTF8    = ProblemBase + "invalid-utf8"    // 422: the body is not valid UTF-8
	ProblemInvalidText    = ProblemBase + "invalid-text"    // 422: text a store cannot hold (NUL)
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
	v = trimSpace(v)
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
	v = trimSpace(v)
	if v == "" || len(v) > 16 || v[0] == '0' {
		return 0, ErrTokenMalformed
	}
	// Digits are summed by hand rather than with strconv.ParseUint, whose
	// *NumError links strconv.Quote and its Unicode tables (see isDigits).
	// At most 16 digits cannot overflow a uint64.
	var n uint64
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, ErrTokenMalformed
		}
		n = n*10 + uint64(v[i]-'0')
	}
	if n > MaxToken {
		return 0, ErrTokenMalformed
	}
	return n, nil
}

// MaxToken is the largest fencing token: 2^53-1, exact in JavaScript.
const MaxToken = 1<<53 - 1

// FormatToken renders a token for a header.
func FormatToken(t uint64) string { return strconv.FormatUint(t, 10) }

// MaxRetryAfter caps what a server can make a client wait, so a hostile or
// broken Retry-After cannot park the queue for days.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter parses Retry-After in either form (delay-seconds or
// HTTP-date) relative to now. ok is false when the header is absent or
// malformed; a date in the past yields 0. The result is capped at MaxRetryAfter.
func ParseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = trimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		if !isDigits(v) {
			return 0, false
		}
		// Once past the cap the value only grows (so overflow, too, means
		// "very long"); leading zeros keep it at 0.
		var n uint64
		for i := 0; i < len(v); i++ {
			n = n*10 + uint64(v[i]-'0')
			if n > uint64(MaxRetryAfter/time.Second) {
				return MaxRetryAfter, true
			}
		}
		return time.Duration(n) * time.Second, true
	}
	t, ok := parseHTTPDate(v)
	if !ok {
		return 0, false
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

// parseHTTPDate parses the three HTTP-date forms RFC 9110 §5.6.7 requires
// recipients to accept, exactly as time.Parse did with these layouts, tried
// in this order:
//
//	"Mon, 02 Jan 2006 15:04:05 GMT"  IMF-fixdate
//	"Monday, 02-Jan-06 15:04:05 GMT" obsolete RFC 850
//	"Mon Jan _2 15:04:05 2006"       ANSI C asctime
//
// It is written by hand because time.Parse links time's whole layout
// machinery (parse, nextStdChunk, ~45 KB of wasm code) into the runtime
// for this one header. It keeps time.Parse's leniencies so the accepted
// set is unchanged (differential tests in wire_test.go hold it to that):
// names match ASCII case-insensitively and the weekday is not checked
// against the date; a space in the layout matches a run of spaces; the
// hour may be one digit, and so may the asctime day; a fractional second
// (".5" or ",5", digits past the ninth ignored) may follow the seconds;
// the RFC 850 year is two characters read as a signed number ("-1" is
// 1999), 69..99 meaning 19xx. The day must exist in the month. The time
// is UTC.
//
// The three forms are told apart by the byte after the first three: only
// IMF-fixdate has ',' there, only asctime ' ', and only RFC 850 a letter
// (a full day name), so at most one layout could have matched.
func parseHTTPDate(v string) (time.Time, bool) {
	p := dateParser{s: v}
	var day, month, year int
	form := byte(0)
	if len(v) > 3 {
		form = v[3]
	}
	switch form {
	case ',': // IMF-fixdate
		p.name(shortDayNames[:])
		p.skip(", ")
		day = p.num(true)
		p.skip(" ")
		month = p.name(monthNames[:]) + 1
		p.skip(" ")
		year = p.year4()
	case ' ': // asctime
		p.name(shortDayNames[:])
		p.skip(" ")
		month = p.name(monthNames[:]) + 1
		p.skip(" ")
		day = p.num(false)
	default: // RFC 850
		p.name(longDayNames[:])
		p.skip(", ")
		day = p.num(true)
		p.skip("-")
		month = p.name(monthNames[:]) + 1
		p.skip("-")
		year = p.year2()
	}
	p.skip(" ")
	hour := p.num(false)
	p.skip(":")
	minute := p.num(true)
	p.skip(":")
	sec := p.num(true)
	nsec := p.frac()
	if form == ' ' {
		p.skip(" ")
		year = p.year4()
	} else {
		p.skip(" GMT")
	}
	if p.bad || p.s != "" || hour >= 24 || minute >= 60 || sec >= 60 || day < 1 || day > daysIn(month, year) {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), true
}

var (
	shortDayNames = [...]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	longDayNames  = [...]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	monthNames    = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

// dateParser consumes s from the front. The first mismatch sets bad; later
// steps still run (on whatever is left) but cannot clear it, so the caller
// checks once at the end.
type dateParser struct {
	s   string
	bad bool
}

// name consumes the first entry of tab that prefixes s, ASCII
// case-insensitively (time's lookup), and returns its index.
func (p *dateParser) name(tab []string) int {
	for i, n := range tab {
		if len(p.s) >= len(n) && foldEqual(p.s[:len(n)], n) {
			p.s = p.s[len(n):]
			return i
		}
	}
	p.bad = true
	return 0
}

// foldEqual reports whether s equals the all-letter name n ignoring ASCII
// case. Setting bit 0x20 lower-cases a letter, and only the two cases of a
// letter map to the same lower-case letter.
func foldEqual(s, n string) bool {
	for i := 0; i < len(n); i++ {
		if c := s[i] | 0x20; c != n[i]|0x20 || c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// skip consumes the literal lit, where a space matches a run of spaces
// (and, at the end of s, none): time's skip.
func (p *dateParser) skip(lit string) {
	for lit != "" {
		if lit[0] == ' ' {
			if p.s != "" && p.s[0] != ' ' {
				p.bad = true
				return
			}
			lit, p.s = cutSpaces(lit), cutSpaces(p.s)
			continue
		}
		if p.s == "" || p.s[0] != lit[0] {
			p.bad = true
			return
		}
		lit, p.s = lit[1:], p.s[1:]
	}
}

func cutSpaces(s string) string {
	for s != "" && s[0] == ' ' {
		s = s[1:]
	}
	return s
}

// num consumes two digits, or one or two when !fixed (time's getnum).
func (p *dateParser) num(fixed bool) int {
	if !isDigitAt(p.s, 0) || fixed && !isDigitAt(p.s, 1) {
		p.bad = true
		return 0
	}
	n := int(p.s[0] - '0')
	if !isDigitAt(p.s, 1) {
		p.s = p.s[1:]
		return n
	}
	n = n*10 + int(p.s[1]-'0')
	p.s = p.s[2:]
	return n
}

// year4 consumes a four-digit year ("2006").
func (p *dateParser) year4() int {
	n := 0
	for i := 0; i < 4; i++ {
		if !isDigitAt(p.s, i) {
			p.bad = true
			return 0
		}
		n = n*10 + int(p.s[i]-'0')
	}
	p.s = p.s[4:]
	return n
}

// year2 consumes a two-character year ("06") the way time.Parse does: an
// optionally signed decimal, then 69..99 -> 19xx, anything else -> 20xx.
func (p *dateParser) year2() int {
	if !isDigitAt(p.s, 1) {
		p.bad = true
		return 0
	}
	n := int(p.s[1] - '0')
	switch c := p.s[0]; {
	case c >= '0' && c <= '9':
		n += 10 * int(c-'0')
	case c == '-':
		n = -n
	case c != '+':
		p.bad = true
		return 0
	}
	p.s = p.s[2:]
	if n >= 69 {
		return n + 1900
	}
	return n + 2000
}

// frac consumes an optional fractional second, ".d..." or ",d...", and
// returns it in nanoseconds; digits past the ninth are consumed and ignored.
func (p *dateParser) frac() int {
	if len(p.s) < 2 || p.s[0] != '.' && p.s[0] != ',' || !isDigitAt(p.s, 1) {
		return 0
	}
	n := 2
	for isDigitAt(p.s, n) {
		n++
	}
	ns := 0
	for i := 1; i < 10; i++ {
		ns *= 10
		if i < n {
			ns += int(p.s[i] - '0')
		}
	}
	p.s = p.s[n:]
	return ns
}

func isDigitAt(s string, i int) bool { return i < len(s) && s[i] >= '0' && s[i] <= '9' }

// daysIn is the number of days in month (1..12) of year (proleptic
// Gregorian, as time uses).
func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// trimSpace is strings.TrimSpace (Unicode white space at either end;
// invalid UTF-8 is not space). Hand-written so the runtime does not link
// strings' Trim family and unicode's range tables for three header parsers.
// One forward pass: end is where the last non-space rune ends.
func trimSpace(s string) string {
	first, end := -1, 0
	prevWord := false
	for i, r := range s {
		if prevWord {
			end = i
		}
		prevWord = !isSpace(r)
		if prevWord && first < 0 {
			first = i
		}
	}
	if first < 0 {
		return ""
	}
	if prevWord {
		end = len(s)
	}
	return s[first:end]
}

// isSpace is unicode.IsSpace: the White_Space property.
func isSpace(r rune) bool {
	switch {
	case r == ' ', r >= '\t' && r <= '\r', r == 0x85, r == 0xa0, r == 0x1680,
		r >= 0x2000 && r <= 0x200a, r == 0x2028, r == 0x2029, r == 0x202f, r == 0x205f, r == 0x3000:
		return true
	}
	return false
}

// isDigits reports whether s is all ASCII digits. The parsers here check
// digits by hand instead of calling strconv.ParseUint: its errors are
// *strconv.NumError, whose Error method quotes the input with strconv.Quote,
// and that links Unicode printability tables (~5 KB brotli) into the
// runtime that nothing else needs.
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
	case OutcomeSession:
		return "session-mismatch"
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
