package server_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/tabfence/tabfence/internal/server"
	"github.com/tabfence/tabfence/internal/wire"
	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/pgstore/pgtest"
)

// Ids that encoding/json would map to one string must not overwrite each
// other, and no note input is ever a 5xx, on either store.
func testHostileNotes(t *testing.T, db string) {
	hs, _ := newServer(t, db)
	base := hs.URL
	for i, c := range []struct {
		body, problem string
	}{
		{"{\"id\":\"coll\xff\",\"text\":\"first\"}", wire.ProblemInvalidUTF8},
		{"{\"id\":\"coll\xfe\",\"text\":\"second\"}", wire.ProblemInvalidUTF8},
		{`{"id":"coll\ud800","text":"first"}`, wire.ProblemBase + "invalid-note"},
		{`{"id":"coll\udbff","text":"second"}`, wire.ProblemBase + "invalid-note"},
		{`{"id":"coll\udc00\ud800","text":"third"}`, wire.ProblemBase + "invalid-note"},
		{`{"id":"nul","text":"a\u0000b"}`, wire.ProblemBase + "invalid-note"},
		{`{"id":"nul\u0000","text":"x"}`, wire.ProblemBase + "invalid-note"},
	} {
		resp, b := call(t, "POST", base+"/api/notes", "ann", "h"+string(rune('a'+i)), c.body)
		var p receiver.Problem
		_ = json.Unmarshal(b, &p)
		if resp.StatusCode != 422 || p.Type != c.problem {
			t.Fatalf("%q: %d %s, want 422 %s", c.body, resp.StatusCode, b, c.problem)
		}
	}
	if _, b := call(t, "GET", base+"/api/notes", "ann", "", ""); string(b) != "[]" {
		t.Fatalf("notes stored from refused bodies: %s", b)
	}
	// A surrogate pair and an escaped backslash before "u" are fine.
	resp, b := call(t, "POST", base+"/api/notes", "ann", "pair", `{"id":"\ud83c\udf89","text":"\\ud800"}`)
	var n server.Note
	if err := json.Unmarshal(b, &n); resp.StatusCode != 201 || err != nil || n.ID != "🎉" || n.Text != `\ud800` {
		t.Fatalf("surrogate pair: %d %s", resp.StatusCode, b)
	}
	if n := effects(t, base); n != 1 {
		t.Fatalf("effects %d, want 1", n)
	}
}

func TestHostileNotesSQLite(t *testing.T) {
	t.Parallel()
	testHostileNotes(t, filepath.Join(t.TempDir(), "h.db"))
}

func TestHostileNotesPostgres(t *testing.T) {
	t.Parallel()
	testHostileNotes(t, pgtest.SchemaURL(t))
}
