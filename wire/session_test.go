package wire

import "testing"

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
		if got := FormatClientUser(c.in); got != c.want {
			t.Errorf("FormatClientUser(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// Distinct users stay distinct once formatted.
	if FormatClientUser("a%20b") == FormatClientUser("a b") {
		t.Fatal("percent-escaping is ambiguous")
	}
	if OutcomeSession.String() != "session-mismatch" {
		t.Fatal(OutcomeSession.String())
	}
}
