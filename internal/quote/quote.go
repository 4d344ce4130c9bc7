// Package quote renders a string for an error message without strconv:
// strconv.Quote links strconv's Unicode tables (about 11 KB of wasm code)
// into the download for a handful of error messages.
package quote

// Quote renders s in double quotes, with quotes, backslashes and control
// characters escaped, so a hostile or mistaken argument cannot garble the
// message.
func Quote(s string) string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20 || c == 0x7f:
			b = append(b, '\\', 'x', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}
