package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/wire"
)

// Note is one demo note as the API returns it.
type Note struct {
	ID      string `json:"id"`
	Text    string `json:"text"`
	Effects int64  `json:"effects"` // how many times a command changed it
	User    string `json:"user"`
}

// Limits of the demo API.
const (
	MaxNoteID   = 200
	MaxNoteText = 10000
)

// Errors from DecodeNote; use errors.Is.
var (
	ErrNoteJSON    = errors.New("server: note is not a JSON object")
	ErrNoteInvalid = errors.New("server: note invalid")
)

// DecodeNote parses and validates a POST /api/notes body: a JSON object
// with a non-empty id (up to 200 bytes) and a text (up to 10000 bytes).
// Unknown fields are ignored. The body must be valid UTF-8 and its strings
// free of NUL and of unpaired surrogate escapes: encoding/json would turn
// invalid bytes and lone surrogates into U+FFFD, so "coll\xff" and
// "coll\xfe" would become one id and the second note would overwrite the
// first.
func DecodeNote(body []byte) (id, text string, err error) {
	if !utf8.Valid(body) || loneSurrogate(body) {
		return "", "", errors.Join(ErrNoteInvalid, errors.New("the body must be UTF-8 without unpaired surrogates"))
	}
	var in struct {
		ID   *string `json:"id"`
		Text *string `json:"text"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&in); err != nil {
		return "", "", ErrNoteJSON
	}
	if dec.More() {
		return "", "", ErrNoteJSON
	}
	switch {
	case in.ID == nil || *in.ID == "" || len(*in.ID) > MaxNoteID || !receiver.ValidText(*in.ID):
		return "", "", errors.Join(ErrNoteInvalid, errors.New("id must be 1-200 bytes of UTF-8 without NUL"))
	case in.Text == nil || len(*in.Text) > MaxNoteText || !receiver.ValidText(*in.Text):
		return "", "", errors.Join(ErrNoteInvalid, errors.New("text must be a string of at most 10000 bytes without NUL"))
	}
	return *in.ID, *in.Text, nil
}

// loneSurrogate reports whether a JSON text holds a \uD800-\uDFFF escape
// that is not part of a high-low pair. It scans escapes only; the decoder
// judges everything else.
func loneSurrogate(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+1 < len(b) && b[i+1] != 'u' {
			i++ // an escaped character, possibly a backslash
			continue
		}
		r, ok := hex4(b, i+2)
		switch {
		case !ok || r < 0xd800 || r > 0xdfff:
		case r >= 0xdc00:
			return true // a low surrogate first
		default:
			lo, ok := hex4(b, i+8)
			if i+7 >= len(b) || b[i+6] != '\\' || b[i+7] != 'u' || !ok || lo < 0xdc00 || lo > 0xdfff {
				return true
			}
			i += 11
		}
	}
	return false
}

// hex4 parses the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// putNote upserts a note and counts the effect, inside the receiver's
// transaction: a retried command with the same key is replayed, not re-run.
func putNote(ctx context.Context, tx receiver.Tx, r *receiver.Request) (receiver.Response, error) {
	id, text, err := DecodeNote(r.Body)
	switch {
	case errors.Is(err, ErrNoteJSON):
		return receiver.ProblemResponse(receiver.Problem{Type: wire.ProblemBase + "bad-request", Title: "Body is not a JSON note",
			Status: http.StatusBadRequest, Detail: `Send {"id": "...", "text": "..."}.`}), nil
	case err != nil:
		return receiver.ProblemResponse(receiver.Problem{Type: wire.ProblemBase + "invalid-note", Title: "Note invalid",
			Status: http.StatusUnprocessableEntity, Detail: "id must be 1-200 bytes, text at most 10000 bytes, both UTF-8 without NUL."}), nil
	}
	var effects int64
	err = tx.QueryRow(ctx, `INSERT INTO demo_notes (user_id, id, text, effects) VALUES ($1, $2, $3, 1)
		ON CONFLICT (user_id, id) DO UPDATE SET text = excluded.text, effects = demo_notes.effects + 1
		RETURNING effects`, r.Scope, id, text).Scan(&effects)
	if err != nil {
		return receiver.Response{}, err
	}
	if _, err := tx.Exec(ctx, `UPDATE demo_counters SET n = n + 1 WHERE name = 'effects'`); err != nil {
		return receiver.Response{}, err
	}
	status := http.StatusOK
	if effects == 1 {
		status = http.StatusCreated
	}
	return receiver.JSON(status, Note{ID: id, Text: text, Effects: effects, User: r.Scope})
}

func (s *Server) listNotes(w http.ResponseWriter, r *http.Request) {
	user, err := demoScope(r)
	if err != nil {
		writeJSONProblem(w, receiver.Problem{Type: wire.ProblemUnauthenticated, Title: "Authentication required",
			Status: http.StatusUnauthorized, Detail: "The demo takes the user from the " + DemoUserHeader + " header."})
		return
	}
	notes := []Note{}
	err = s.store.View(r.Context(), func(q receiver.Tx) error {
		rows, err := q.Query(r.Context(), `SELECT id, text, effects FROM demo_notes WHERE user_id = $1 ORDER BY id`, user)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			n := Note{User: user}
			if err := rows.Scan(&n.ID, &n.Text, &n.Effects); err != nil {
				return err
			}
			notes = append(notes, n)
		}
		return rows.Err()
	})
	if err != nil {
		s.log.Error("list notes", "err", err)
		writeJSONProblem(w, receiver.Problem{Type: wire.ProblemInternal, Title: "Internal server error", Status: 500})
		return
	}
	writeJSON(w, notes)
}

func (s *Server) effects(w http.ResponseWriter, r *http.Request) {
	var n int64
	err := s.store.View(r.Context(), func(q receiver.Tx) error {
		return q.QueryRow(r.Context(), `SELECT n FROM demo_counters WHERE name = 'effects'`).Scan(&n)
	})
	if err != nil {
		s.log.Error("count effects", "err", err)
		writeJSONProblem(w, receiver.Problem{Type: wire.ProblemInternal, Title: "Internal server error", Status: 500})
		return
	}
	writeJSON(w, map[string]int64{"effects": n})
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

func writeJSONProblem(w http.ResponseWriter, p receiver.Problem) {
	resp := receiver.ProblemResponse(p)
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// migrate creates the demo's tables. The SQL is common to SQLite and
// PostgreSQL.
//
// Instances starting together on one PostgreSQL database race on CREATE
// TABLE IF NOT EXISTS (the loser fails with a unique violation in pg_type):
// another attempt finds the tables made.
func migrate(ctx context.Context, st receiver.Store) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = migrateOnce(ctx, st); err == nil {
			return nil
		}
	}
	return err
}

func migrateOnce(ctx context.Context, st receiver.Store) error {
	tx, err := st.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS demo_notes (
			user_id TEXT NOT NULL, id TEXT NOT NULL, text TEXT NOT NULL, effects BIGINT NOT NULL,
			PRIMARY KEY (user_id, id))`,
		`CREATE TABLE IF NOT EXISTS demo_counters (name TEXT PRIMARY KEY, n BIGINT NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS demo_issues (
			user_id TEXT NOT NULL, id TEXT NOT NULL, title TEXT NOT NULL, done BIGINT NOT NULL,
			by_user TEXT NOT NULL, updated_at BIGINT NOT NULL,
			PRIMARY KEY (user_id, id))`,
		`INSERT INTO demo_counters (name, n) VALUES ('effects', 0) ON CONFLICT (name) DO NOTHING`,
	} {
		if _, err := tx.Exec(ctx, q); err != nil {
			return err
		}
	}
	return tx.Commit()
}
