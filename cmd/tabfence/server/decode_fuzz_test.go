package server

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
)

// Two ids that encoding/json would decode to one string ("coll\uFFFD") are
// refused before decoding, as is text a store cannot hold.
func TestDecodeNoteRefusesWhatJSONWouldRewrite(t *testing.T) {
	for _, body := range []string{
		"{\"id\":\"coll\xff\",\"text\":\"\"}",
		`{"id":"coll\ud800","text":""}`,
		`{"id":"coll\uDFFF","text":""}`,
		`{"id":"coll\ud800\u0041","text":""}`,
		`{"id":"a","text":"x\u0000"}`,
		`{"id":"a\u0000","text":""}`,
	} {
		_, _, err := DecodeNote([]byte(body))
		assert.ErrorIs(t, err, ErrNoteInvalid, "%q: %v, want ErrNoteInvalid", body, err)
	}
	for body, want := range map[string]string{
		`{"id":"\ud83c\udf89","text":""}`: "🎉",
		`{"id":"\\ud800","text":""}`:      `\ud800`,
		`{"id":"coll\ufffd","text":""}`:   "coll\uFFFD",
		`{"id":"x\\","text":"\\u"}`:       `x\`,
	} {
		id, _, err := DecodeNote([]byte(body))
		assert.NoError(t, err, "%q: id %q", body, id)
		assert.Equal(t, want, id, "%q: id %q", body, id)
		assert.False(t, strings.ContainsRune(id, 0), "%q: id %q", body, id)
	}
}

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
		require.NotEqual(t, "", id, "accepted invalid note %q %q", id, text)
		require.LessOrEqual(t, len(id), MaxNoteID, "accepted invalid note %q %q", id, text)
		require.LessOrEqual(t, len(text), MaxNoteText, "accepted invalid note %q %q", id, text)
		require.True(t, receiver.ValidText(id), "accepted invalid note %q %q", id, text)
		require.True(t, receiver.ValidText(text), "accepted invalid note %q %q", id, text)
	})
}

// FuzzDecodeIssue: any payload either decodes into a valid issue or fails
// with one of the two typed errors; it never panics.
func FuzzDecodeIssue(f *testing.F) {
	for _, s := range []string{`{"id":"a","title":"b","done":true}`, `{"id":"a"}`, `{"id":""}`, `{}`, `[]`, `null`,
		`{"id":"a","title":1}`, "{\"id\":\"\xff\",\"title\":\"\"}", `{"id":"coll\ud800","title":""}`, `{"id":"a","done":"yes"}`} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, payload []byte, put bool) {
		is, err := DecodeIssue(payload, put)
		if err != nil {
			if !errors.Is(err, ErrIssueJSON) && !errors.Is(err, ErrIssueInvalid) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		require.NotEqual(t, "", is.ID)
		require.LessOrEqual(t, len(is.ID), MaxNoteID)
		require.LessOrEqual(t, len(is.Title), MaxIssueTitle)
		require.True(t, receiver.ValidText(is.ID), "accepted invalid id %q", is.ID)
		require.True(t, receiver.ValidText(is.Title), "accepted invalid title %q", is.Title)
		require.True(t, put || is.Title == "", "a delete carries only its id")
	})
}
