package wire

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFormatClientUser(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"alice", "alice"},
		{"a@b.example", "a@b.example"},
		{"", ""},
		{"a b", "a%20b"},
		{"100%", "100%25"},
		{"é", "%C3%A9"},
		{"x\r\ny", "x%0D%0Ay"},
		{"\x7f", "%7F"},
	} {
		assert.Equal(t, c.want, FormatClientUser(c.in), "FormatClientUser(%q)", c.in)
	}
	// Distinct users stay distinct once formatted.
	require.NotEqual(t, FormatClientUser("a b"), FormatClientUser("a%20b"), "percent-escaping is ambiguous")
	require.Equal(t, "session-mismatch", OutcomeSession.String())
}
