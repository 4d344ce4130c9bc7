package idb

import (
	"slices"
	"strings"
	"testing"
)

// joinSep and splitSep stand in for strings.Join and strings.Split (see
// strs.go): they must agree with them.
func TestJoinSplitMatchStrings(t *testing.T) {
	lists := [][]string{nil, {}, {""}, {"a"}, {"", ""}, {"a", "b"}, {"op-1", "", "op-3"}, {"a\x00b", "c"}}
	for _, l := range lists {
		for _, sep := range []byte{'\n', 0} {
			if got, want := joinSep(l, sep), strings.Join(l, string(sep)); got != want {
				t.Errorf("joinSep(%q, %q) = %q, want %q", l, sep, got, want)
			}
		}
	}
	for _, s := range []string{"", "a", "\n", "a\n", "\na", "a\nb", "a\n\nb", "\n\n", "op-1\nop-2\nop-3"} {
		if got, want := splitSep(s, '\n'), strings.Split(s, "\n"); !slices.Equal(got, want) {
			t.Errorf("splitSep(%q) = %q, want %q", s, got, want)
		}
	}
}

func FuzzJoinSplitMatchStrings(f *testing.F) {
	f.Add("a\nb\n\nc")
	f.Fuzz(func(t *testing.T, s string) {
		want := strings.Split(s, "\n")
		got := splitSep(s, '\n')
		if !slices.Equal(got, want) {
			t.Fatalf("splitSep(%q) = %q, want %q", s, got, want)
		}
		if j := joinSep(got, '\n'); j != s {
			t.Fatalf("joinSep(splitSep(%q)) = %q", s, j)
		}
	})
}
