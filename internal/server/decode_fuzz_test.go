package server

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeNote: any body either decodes into a valid note or fails with
// one of the two typed errors; it never panics.
func FuzzDecodeNote(f *testing.F) {
	for _, s := range []string{`{"id":"a","text":"b"}`, `{"id":"","text":""}`, `{}`, `[]`, `null`, `{"id":1}`,
		`{"id":"a","text":"b"} {}`, "{\"id\":\"\xff\",\"text\":\"\"}", `{"id":"a","text":"b","extra":[1,2]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		id, text, err := DecodeNote(body)
		if err != nil {
			if !errors.Is(err, ErrNoteJSON) && !errors.Is(err, ErrNoteInvalid) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if id == "" || len(id) > MaxNoteID || len(text) > MaxNoteText || !utf8.ValidString(id) || !utf8.ValidString(text) {
			t.Fatalf("accepted invalid note %q %q", id, text)
		}
	})
}
