package locks

import (
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// validScopeStd is validScope as it was, with utf8.ValidString: the hand
// check (no ValidString in the runtime) must give the same error.
func validScopeStd(scope string) string {
	switch {
	case scope == "":
		return "empty scope"
	case len(scope) > MaxScopeLen:
		return "scope longer than " + strconv.Itoa(MaxScopeLen) + " bytes"
	case !utf8.ValidString(scope):
		return "scope is not valid UTF-8"
	}
	for i, r := range scope {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return "control character in scope at byte " + strconv.Itoa(i)
		}
	}
	return ""
}

func checkScope(t *testing.T, s string) {
	t.Helper()
	want := validScopeStd(s)
	got := ""
	if err := validScope(s); err != nil {
		got = err.(*detailError).detail
	}
	require.Equal(t, want, got, "validScope(%q)", s)
}

var scopeCases = []string{
	"", "s", "ünïcode ✓", "\uFFFD", "a\uFFFDb", "\xef\xbf", "\xef\xbf\xbd", "\xef\xbf\xbe", "\xff",
	"bad\xffutf8", "\n\xff", "\xff\n", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf", "ok\u0085",
	"\U0010FFFF", "x\xf0\x9f\x98", "\x7f", "tab\there",
}

func TestValidScopeMatchesValidString(t *testing.T) {
	for _, s := range scopeCases {
		checkScope(t, s)
	}
}

func FuzzValidScope(f *testing.F) {
	for _, s := range scopeCases {
		f.Add(s)
	}
	f.Fuzz(checkScope)
}
