package quote

import "testing"

func TestQuoteEscapesWhatWouldGarbleAMessage(t *testing.T) {
	for in, want := range map[string]string{
		"plain":         `"plain"`,
		"":              `""`,
		`a"b`:           `"a\"b"`,
		`back\slash`:    `"back\\slash"`,
		"nl\nx\x00\x7f": `"nl\nx\x00\x7f"`,
		"\t\r":          `"\t\r"`,
		"ünïcode":       `"ünïcode"`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}
