package channel

import "strconv"

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
	b = append(b, `{"protocol":`...)
	b = AppendJSONString(b, e.Protocol)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, int64(e.Version), 10)
	b = append(b, `,"id":`...)
	b = AppendJSONString(b, e.ID)
	b = append(b, `,"kind":`...)
	b = AppendJSONString(b, e.Kind)
	b = append(b, `,"resource":`...)
	b = AppendJSONString(b, e.Resource)
	b = append(b, `,"owner":`...)
	b = AppendJSONString(b, e.Owner)
	b = append(b, `,"token":`...)
	b = strconv.AppendUint(b, e.Token, 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, e.Seq, 10)
	b = append(b, `,"sentAt":`...)
	b = strconv.AppendInt(b, e.SentAt, 10)
	if withPayload {
		b = append(b, `,"payload":null`...)
	}
	return append(b, '}')
}
