package wire

// Header is a small case-insensitive header set (fetch reports lowercase
// names, wire uses canonical ones). Set keeps one value per name.
type Header map[string]string

// Get returns the value of name, compared case-insensitively.
func (h Header) Get(name string) string {
	if v, ok := h[name]; ok {
		return v
	}
	for k, v := range h {
		if equalFold(k, name) {
			return v
		}
	}
	return ""
}

// equalFold compares header names case-insensitively. Field names are
// ASCII tokens (RFC 9110 §5.1), so ASCII folding is exact; strings.EqualFold
// would link Unicode case tables into the wasm download for nothing.
func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
