package channel

import (
	"strconv"
	"unicode/utf8"
)

// The browser side builds each outgoing envelope, and the object handed to
// a subscriber, with one JSON.parse of a header made here instead of one
// property write (one crossing into JavaScript, one property-name decode)
// per field; the payload, which is not JSON, is set after. These helpers
// are the pure part, tested natively.

// AppendJSONString appends s as a JSON string literal. Only '"', '\\' and
// the control characters below U+0020 are escaped, byte by byte: every
// other byte is copied, so JSON.parse returns what js.ValueOf(s) would
// (bytes that are not UTF-8 decode to U+FFFD either way, and an ASCII byte
// is never taken into a broken sequence by the decoder).
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendHeaderJSON appends e's header as a JSON object in the envelope's
// field order: protocol, version, id, kind, resource, owner, token, seq,
// sentAt, then "payload":null when withPayload (a placeholder the caller
// overwrites, keeping the order).
func appendHeaderJSON(b []byte, e Envelope, withPayload bool) []byte {
	b = AppendJSONField(b, `{"protocol":`, e.Protocol)
	b = AppendUintField(b, `,"version":`, uint64(e.Version))
	b = AppendJSONField(b, `,"id":`, e.ID)
	b = AppendJSONField(b, `,"kind":`, e.Kind)
	b = AppendJSONField(b, `,"resource":`, e.Resource)
	b = AppendJSONField(b, `,"owner":`, e.Owner)
	b = AppendUintField(b, `,"token":`, e.Token)
	b = AppendUintField(b, `,"seq":`, e.Seq)
	b = AppendUintField(b, `,"sentAt":`, uint64(e.SentAt))
	if withPayload {
		b = append(b, `,"payload":null`...)
	}
	return append(b, '}')
}

// AppendJSONField appends prefix (for example `,"kind":`) and s as a JSON
// string. (Not inlined: a message's JSON is a row of these calls, and
// every inlined copy would be downloaded.)
//
//go:noinline
func AppendJSONField(b []byte, prefix, s string) []byte {
	return AppendJSONString(append(b, prefix...), s)
}

// AppendUintField appends prefix and n.
//
//go:noinline
func AppendUintField(b []byte, prefix string, n uint64) []byte {
	return strconv.AppendUint(append(b, prefix...), n, 10)
}

// decodeHeaderJSON reads the header the loader's rx hook hands Go for a
// received object (see fast.js): JSON.stringify([protocol, version, id,
// kind, resource, owner, token, seq, sentAt]), each field as itself when it
// is a string or a number and null otherwise. It applies decode's rules,
// in decode's order, to what JSON can express — not the string "tabfence":
// foreign; strings bounded in UTF-16 units; numbers non-negative integers
// <= MaxToken (NaN and Infinity arrive as null) — so it returns what decode
// would for the same message; anything else is malformed.
func decodeHeaderJSON(h string, l Limits) (e Envelope, why Reason) {
	p := hdrParser{s: h}
	if !p.lit('[') {
		return Envelope{}, Malformed
	}
	if proto, ok := p.str(); !ok || proto != Protocol || !p.lit(',') {
		return Envelope{}, ForeignProtocol
	}
	ver, ok := p.num()
	if !ok || !p.lit(',') {
		return Envelope{}, Malformed
	}
	if ver != Version {
		return Envelope{}, WrongVersion
	}
	strs := [4]*string{&e.ID, &e.Kind, &e.Resource, &e.Owner}
	maxes := [4]int{l.MaxID, l.MaxKind, l.MaxResource, l.MaxOwner}
	for i, dst := range strs {
		s, ok := p.str()
		if !ok || !p.lit(',') {
			return Envelope{}, Malformed
		}
		if utf16Len(s) > maxes[i] {
			return Envelope{}, Oversized
		}
		*dst = s
	}
	var nums [3]uint64
	for i := range nums {
		sep := byte(',')
		if i == len(nums)-1 {
			sep = ']'
		}
		x, ok := p.num()
		if !ok || !p.lit(sep) {
			return Envelope{}, Malformed
		}
		nums[i] = x
	}
	if p.i != len(p.s) {
		return Envelope{}, Malformed
	}
	e.Protocol, e.Version = Protocol, Version
	e.Token, e.Seq, e.SentAt = nums[0], nums[1], int64(nums[2])
	return e, ReasonNone
}

// headerTextBound is the most UTF-16 units the strings of a header within
// l can hold together (the loader's rx copies no longer ones into a
// header: Go reads such a message's fields itself, bounding each).
func headerTextBound(l Limits) int {
	return len(Protocol) + l.MaxID + l.MaxKind + l.MaxResource + l.MaxOwner
}

type hdrParser struct {
	s string
	i int
}

func (p *hdrParser) lit(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// num reads a non-negative integer <= MaxToken (the rules of num in
// decode). JSON.stringify writes every such number as plain digits (it
// uses an exponent only from 1e21 on); any other form — a sign, a
// fraction, an exponent, null for NaN and Infinity — is a number decode
// would refuse too. (Plain digits only: strconv.ParseFloat would link
// kilobytes of float parsing into the download.)
func (p *hdrParser) num() (uint64, bool) {
	var x uint64
	j := p.i
	for ; j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9'; j++ {
		x = x*10 + uint64(p.s[j]-'0')
		if x > MaxToken {
			return 0, false
		}
	}
	if j == p.i || j < len(p.s) && (p.s[j] == '.' || p.s[j] == 'e' || p.s[j] == 'E') {
		return 0, false
	}
	p.i = j
	return x, true
}

// str reads a JSON string as JSON.stringify writes it. A lone surrogate
// (\udXXX without its pair) becomes U+FFFD, as copying the string from
// JavaScript into Go does.
func (p *hdrParser) str() (string, bool) {
	if !p.lit('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != '"' && p.s[p.i] != '\\' && p.s[p.i] >= 0x20 {
		p.i++
	}
	if p.i < len(p.s) && p.s[p.i] == '"' { // no escapes: the common case
		s := p.s[start:p.i]
		p.i++
		return s, true
	}
	b := []byte(p.s[start:p.i])
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b = append(b, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.s) {
			return "", false
		}
		esc := p.s[p.i+1]
		p.i += 2
		switch esc {
		case '"', '\\', '/':
			b = append(b, esc)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", false
			}
			if r >= 0xd800 && r < 0xdc00 && len(p.s)-p.i >= 2 && p.s[p.i:p.i+2] == `\u` {
				save := p.i
				p.i += 2
				if r2, ok := p.hex4(); ok && r2 >= 0xdc00 && r2 < 0xe000 {
					r = 0x10000 + (r-0xd800)<<10 + (r2 - 0xdc00)
				} else {
					p.i = save
				}
			}
			if r >= 0xd800 && r < 0xe000 {
				r = utf8.RuneError
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (p *hdrParser) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(p.s[p.i : p.i+4]) {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	p.i += 4
	return r, true
}

// utf16Len is the length of s in UTF-16 units, JavaScript's length.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// idWords reads an ID of exactly 32 lowercase hex digits (NewID's) as four
// 32-bit words, most significant first, for the hook post2, which writes them
// back as the same 32 digits; ok is false for any other ID, which is posted
// as JSON.
func idWords(id string) (w [4]uint32, ok bool) {
	if len(id) != 32 {
		return w, false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		var d uint32
		switch {
		case '0' <= c && c <= '9':
			d = uint32(c - '0')
		case 'a' <= c && c <= 'f':
			d = uint32(c-'a') + 10
		default:
			return w, false
		}
		w[i/8] = w[i/8]<<4 | d
	}
	return w, true
}
