package wire

import (
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trimSpace and isSpace replace strings.TrimSpace and unicode.IsSpace (see
// wire.go); they must agree everywhere.

func TestIsSpaceMatchesUnicode(t *testing.T) {
	for r := rune(-1); r <= unicode.MaxRune+1; r++ {
		require.Equal(t, unicode.IsSpace(r), isSpace(r), "isSpace(%U)", r)
	}
}

var trimCases = []string{
	"", " ", "  \t\n\v\f\r ", "a", " a ", "\ta b\n", "\u0085a\u00a0", "\u3000x\u2028\u2029",
	"\u200bx\u200b", "\xffa\xff", " \xff ", "\xe2\x80\xa8", "\xe2\x80", "a\xe2\x80\xa8\x80", " \xe2\xe2\x80\xa8",
	"\u1680\u2000\u200a\u202f\u205f", "x\u180e", "\uFFFD ", " \uFFFD", "é ", " é", "\x85", "\xc2\x85a\xc2\x85",
	"\"abc\" ", " 12 ",
}

func TestTrimSpaceMatchesStrings(t *testing.T) {
	for _, s := range trimCases {
		got, want := trimSpace(s), strings.TrimSpace(s)
		assert.Equal(t, want, got, "trimSpace(%q)", s)
	}
}

func FuzzTrimSpace(f *testing.F) {
	for _, s := range trimCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, want := trimSpace(s), strings.TrimSpace(s)
		require.Equal(t, want, got, "trimSpace(%q)", s)
	})
}
