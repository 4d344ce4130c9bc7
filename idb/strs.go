package idb

// joinSep is strings.Join with a one-byte separator, and splitSep (for a
// non-empty s) strings.Split: hand-written because nothing else in the
// runtime links strings.Join/Split, whose code these few lines replace.
func joinSep(list []string, sep byte) string {
	return string(appendSep(make([]byte, 0, joinedLen(list)), list, sep))
}

// joinedLen is the length of list joined with a one-byte separator.
func joinedLen(list []string) int {
	n := max(len(list)-1, 0)
	for _, s := range list {
		n += len(s)
	}
	return n
}

// appendSep appends list joined with sep to b.
func appendSep(b []byte, list []string, sep byte) []byte {
	for i, s := range list {
		if i > 0 {
			b = append(b, sep)
		}
		b = append(b, s...)
	}
	return b
}

func splitSep(s string, sep byte) []string {
	n := 1
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			n++
		}
	}
	out := make([]string, 0, n) // one allocation: a fence splits its IDs on every apply
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
