package idb

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// joinSep and splitSep stand in for strings.Join and strings.Split (see
// strs.go): they must agree with them.
func TestJoinSplitMatchStrings(t *testing.T) {
	lists := [][]string{nil, {}, {""}, {"a"}, {"", ""}, {"a", "b"}, {"op-1", "", "op-3"}, {"a\x00b", "c"}}
	for _, l := range lists {
		for _, sep := range []byte{'\n', 0} {
			got, want := joinSep(l, sep), strings.Join(l, string(sep))
			assert.Equal(t, want, got, "joinSep(%q, %q)", l, sep)
		}
	}
	for _, s := range []string{"", "a", "\n", "a\n", "\na", "a\nb", "a\n\nb", "\n\n", "op-1\nop-2\nop-3"} {
		got, want := splitSep(s, '\n'), strings.Split(s, "\n")
		assert.True(t, slices.Equal(got, want), "splitSep(%q) = %q, want %q", s, got, want)
	}
}

func FuzzJoinSplitMatchStrings(f *testing.F) {
	f.Add("a\nb\n\nc")
	f.Fuzz(func(t *testing.T, s string) {
		want := strings.Split(s, "\n")
		got := splitSep(s, '\n')
		require.True(t, slices.Equal(got, want), "splitSep(%q) = %q, want %q", s, got, want)
		require.Equal(t, s, joinSep(got, '\n'), "joinSep(splitSep(%q))", s)
	})
}
