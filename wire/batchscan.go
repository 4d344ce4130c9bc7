package wire

import (
	"time"
	"unicode/utf8"
)

// scanner reads the batch documents: JSON (RFC 8259) in UTF-8, strictly.
// Each method consumes what it recognizes from b[i:] and reports whether it
// did; after a false the position is meaningless and the caller gives up.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) && isJSONSpace(s.b[s.i]) {
		s.i++
	}
}

// next consumes c after any white space.
func (s *scanner) next(c byte) bool {
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// peek reports whether c is next after any white space, without consuming it.
func (s *scanner) peek(c byte) bool {
	s.ws()
	return s.i < len(s.b) && s.b[s.i] == c
}

// object consumes an object, calling member for each member's name with
// the position at its value; member consumes the value.
func (s *scanner) object(member func(name string) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	for {
		s.ws()
		name, ok := s.str()
		if !ok || !s.next(':') || !member(name) {
			return false
		}
		if s.next('}') {
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}

// array consumes an array, calling elem at each element; elem consumes it.
func (s *scanner) array(elem func() bool) bool {
	if !s.next('[') {
		return false
	}
	if s.next(']') {
		return true
	}
	for {
		s.ws()
		if !elem() {
			return false
		}
		if s.next(']') {
			return true
		}
		if !s.next(',') {
			return false
		}
	}
}

// document consumes a whole top-level object whose member name is an
// array (elem called at each element), other members skipped, nothing
// after it. It reports false when the member is missing or repeated.
func (s *scanner) document(name string, elem func() bool) bool {
	found := false
	ok := s.object(func(n string) bool {
		if n != name {
			return s.value(1)
		}
		if found {
			return false
		}
		found = true
		return s.array(elem)
	})
	s.ws()
	return ok && found && s.i == len(s.b)
}

// fields tracks the known members of one object, to refuse a repeated one.
type fields uint8

func (f *fields) first(bit fields) bool {
	if *f&bit != 0 {
		return false
	}
	*f |= bit
	return true
}

// mutation consumes one mutation object. The key is required (the
// endpoint too, checked by the caller).
func (s *scanner) mutation() (BatchMutation, bool) {
	var m BatchMutation
	var seen fields
	ok := s.object(func(name string) bool {
		switch name {
		case "key":
			return seen.first(1) && s.text(&m.Key)
		case "id":
			return seen.first(2) && s.text(&m.OperationID)
		case "op":
			return seen.first(4) && s.text(&m.Operation)
		case "entity":
			return seen.first(8) && s.text(&m.Entity)
		case "payload":
			return seen.first(16) && s.bytes(&m.Payload)
		case "endpoint":
			return seen.first(32) && s.text(&m.Endpoint)
		}
		return s.value(1)
	})
	return m, ok && seen&1 != 0
}

// result consumes one result object. Key and outcome are required.
func (s *scanner) result() (BatchResult, bool) {
	var r BatchResult
	var seen fields
	ok := s.object(func(name string) bool {
		switch name {
		case "key":
			return seen.first(1) && s.text(&r.Key)
		case "outcome":
			var o string
			if !seen.first(2) || !s.text(&o) {
				return false
			}
			r.Outcome = BatchOutcome(o)
			switch r.Outcome {
			case BatchApplied, BatchReplayed, BatchRejected, BatchNotAttempted, BatchRetry:
				return true
			}
			return false
		case "status":
			n, ok := s.uint(maxStatus)
			r.Status = int(n)
			return seen.first(4) && ok
		case "body":
			return seen.first(8) && s.bytes(&r.Body)
		case "problem":
			return seen.first(16) && s.text(&r.Problem)
		case "retryAfter":
			// A longer wait than the format allows is the longest
			// (as Retry-After headers are read), not a broken document.
			n, ok := s.uintCapped(uint64(MaxRetryAfter / time.Second))
			r.RetryAfter = time.Duration(n) * time.Second
			return seen.first(32) && ok
		}
		return s.value(1)
	})
	return r, ok && seen&3 == 3
}

// text consumes a string into *dst.
func (s *scanner) text(dst *string) bool {
	v, ok := s.str()
	*dst = v
	return ok
}

// bytes consumes a payload or body value (see appendBytes): a string's
// text, or any other value's own bytes (aliasing b).
func (s *scanner) bytes(dst *[]byte) bool {
	if s.peek('"') {
		v, ok := s.str()
		*dst = []byte(v)
		return ok
	}
	start := s.i
	if !s.value(1) {
		return false
	}
	*dst = s.b[start:s.i:s.i]
	return true
}

// uint consumes a non-negative integer of at most max (no sign, fraction,
// exponent or leading zero).
func (s *scanner) uint(max uint64) (uint64, bool) {
	s.ws()
	start := s.i
	var n uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		n = n*10 + uint64(s.b[s.i]-'0')
		s.i++
		if n > max {
			return 0, false
		}
	}
	digits := s.i - start
	return n, digits > 0 && (digits == 1 || s.b[start] != '0')
}

// uintCapped is uint with a value over max read as max, however many
// digits it has.
func (s *scanner) uintCapped(max uint64) (uint64, bool) {
	s.ws()
	start := s.i
	var n uint64
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if n = n*10 + uint64(s.b[s.i]-'0'); n > max {
			n = max
		}
		s.i++
	}
	digits := s.i - start
	return n, digits > 0 && (digits == 1 || s.b[start] != '0')
}

// value consumes any JSON value nested depth deep (the document is depth 0).
func (s *scanner) value(depth int) bool {
	if depth > maxDepth {
		return false
	}
	s.ws()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(func(string) bool { return s.value(depth + 1) })
	case c == '[':
		return s.array(func() bool { return s.value(depth + 1) })
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
			s.i += len(lit)
			return true
		}
	}
	return false
}

// number consumes -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case !s.digits():
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// str consumes a string at the position and returns its text. It refuses
// control characters, invalid UTF-8, unknown escapes and surrogate escapes
// that do not pair, so every text it returns is valid UTF-8.
func (s *scanner) str() (string, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return "", false
	}
	s.i++
	start := s.i
	for s.i < len(s.b) { // the common case: nothing escaped
		c := s.b[s.i]
		if c == '"' {
			raw := s.b[start:s.i]
			s.i++
			return string(raw), utf8.Valid(raw)
		}
		if c == '\\' || c < 0x20 {
			break
		}
		s.i++
	}
	out := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(out), utf8.Valid(out)
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		var ok bool
		if out, ok = s.escape(out); !ok {
			return "", false
		}
	}
	return "", false
}

// escape consumes the escape at the position (a '\') and appends its text.
func (s *scanner) escape(out []byte) ([]byte, bool) {
	if s.i+1 >= len(s.b) {
		return out, false
	}
	c := s.b[s.i+1]
	s.i += 2
	switch c {
	case '"', '\\', '/':
		return append(out, c), true
	case 'b':
		return append(out, '\b'), true
	case 'f':
		return append(out, '\f'), true
	case 'n':
		return append(out, '\n'), true
	case 'r':
		return append(out, '\r'), true
	case 't':
		return append(out, '\t'), true
	case 'u':
	default:
		return out, false
	}
	r, ok := s.hex4()
	switch {
	case !ok || r >= 0xdc00 && r <= 0xdfff:
		return out, false
	case r >= 0xd800 && r <= 0xdbff:
		if s.i+1 >= len(s.b) || s.b[s.i] != '\\' || s.b[s.i+1] != 'u' {
			return out, false
		}
		s.i += 2
		lo, ok := s.hex4()
		if !ok || lo < 0xdc00 || lo > 0xdfff {
			return out, false
		}
		r = 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00)
	}
	return utf8.AppendRune(out, r), true
}

// hex4 consumes four hex digits.
func (s *scanner) hex4() (rune, bool) {
	if len(s.b)-s.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	s.i += 4
	return r, true
}
