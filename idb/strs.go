package idb

// joinSep is strings.Join with a one-byte separator, and splitSep (for a
// non-empty s) strings.Split: hand-written because nothing else in the
// runtime links strings.Join/Split, whose code these few lines replace.
func joinSep(list []string, sep byte) string {
	n := len(list)
	for _, s := range list {
		n += len(s)
	}
	b := make([]byte, 0, n)
	for i, s := range list {
		if i > 0 {
			b = append(b, sep)
		}
		b = append(b, s...)
	}
	return string(b)
}

func splitSep(s string, sep byte) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
