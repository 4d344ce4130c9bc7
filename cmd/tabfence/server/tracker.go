package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/realtime"
	"github.com/tabfence/tabfence/wire"
)

// The demo workspace is a small issue tracker: every tab of a user shows
// the same list, kept current over the realtime connection at /realtime.
// Its replica store is "issues"; its mutations are issue.put (payload
// {"id","title","done"}) and issue.delete (payload {"id"}).
const (
	IssueStore     = "issues"
	OpIssuePut     = "issue.put"
	OpIssueDelete  = "issue.delete"
	MaxIssueTitle  = 1000
	snapshotLimit  = 10000 // issues per user in a snapshot
	problemBadOp   = wire.ProblemBase + "unknown-op"
	problemBadItem = wire.ProblemBase + "invalid-issue"
)

// Issue is one tracker issue as the changes and the snapshot carry it: By
// is the user who made the last change (from the session, never from the
// payload), UpdatedAt its time in Unix milliseconds.
type Issue struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Done      bool   `json:"done"`
	By        string `json:"by"`
	UpdatedAt int64  `json:"updatedAt"`
}

// Change is one entry of a delta's change list: a put (Value) or a delete.
type Change struct {
	Store   string `json:"store"`
	Key     string `json:"key"`
	Value   *Issue `json:"value,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
}

// Snapshot is GET /realtime/snapshot's answer: every issue of the user as
// puts, at least as new as Version (a client that reloads it applies the
// deltas after Version on top, which may repeat some of them).
type Snapshot struct {
	Version uint64   `json:"version"`
	Changes []Change `json:"changes"`
}

var errSnapshotTooLarge = errors.New("server: too many issues for a snapshot")

// Errors from DecodeIssue; use errors.Is.
var (
	ErrIssueJSON    = errors.New("server: issue is not a JSON object")
	ErrIssueInvalid = errors.New("server: issue invalid")
)

// DecodeIssue parses a mutation's payload: an object with an id (1-200
// bytes) and, for a put, a title (at most 1000 bytes) and done. Unknown
// fields are ignored; the payload must be UTF-8 and its strings free of NUL
// and unpaired surrogates (see DecodeNote: two different ids must never
// decode to one).
func DecodeIssue(payload []byte, put bool) (Issue, error) {
	if !utf8.Valid(payload) || loneSurrogate(payload) {
		return Issue{}, ErrIssueInvalid
	}
	var in struct {
		ID    *string `json:"id"`
		Title *string `json:"title"`
		Done  *bool   `json:"done"`
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&in); err != nil || dec.More() {
		return Issue{}, ErrIssueJSON
	}
	if in.ID == nil || *in.ID == "" || len(*in.ID) > MaxNoteID || !receiver.ValidText(*in.ID) {
		return Issue{}, ErrIssueInvalid
	}
	out := Issue{ID: *in.ID}
	if !put {
		return out, nil
	}
	if in.Title == nil || len(*in.Title) > MaxIssueTitle || !receiver.ValidText(*in.Title) {
		return Issue{}, ErrIssueInvalid
	}
	out.Title = *in.Title
	if in.Done != nil {
		out.Done = *in.Done
	}
	return out, nil
}

// applyIssue is the realtime endpoint's business handler: it writes the
// issue in the receiver's transaction (where the change row is written
// too) and returns the change list every tab applies.
func (s *Server) applyIssue(ctx context.Context, tx receiver.Tx, r *realtime.Request) (realtime.Result, error) {
	put := r.Op == OpIssuePut
	if !put && r.Op != OpIssueDelete {
		return problemResult(http.StatusUnprocessableEntity, problemBadOp, "Unknown operation",
			"The tracker knows issue.put and issue.delete."), nil
	}
	is, err := DecodeIssue(r.Payload, put)
	switch {
	case errors.Is(err, ErrIssueJSON):
		return problemResult(http.StatusBadRequest, wire.ProblemBase+"bad-request", "Payload is not a JSON issue",
			`Send {"id":"...","title":"...","done":false}.`), nil
	case err != nil:
		return problemResult(http.StatusUnprocessableEntity, problemBadItem, "Issue invalid",
			"id must be 1-200 bytes, title at most 1000 bytes, both UTF-8 without NUL."), nil
	}
	ch := Change{Store: IssueStore, Key: is.ID}
	if put {
		is.By, is.UpdatedAt = r.Scope, s.rc.Options().Clock().UnixMilli()
		_, err = tx.Exec(ctx, `INSERT INTO demo_issues (user_id, id, title, done, by_user, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (user_id, id) DO UPDATE SET title = excluded.title, done = excluded.done,
			by_user = excluded.by_user, updated_at = excluded.updated_at`, r.Scope, is.ID, is.Title, boolInt(is.Done), is.By, is.UpdatedAt)
		ch.Value = &is
	} else {
		_, err = tx.Exec(ctx, `DELETE FROM demo_issues WHERE user_id = $1 AND id = $2`, r.Scope, is.ID)
		ch.Deleted = true
	}
	if err == nil {
		_, err = tx.Exec(ctx, `UPDATE demo_counters SET n = n + 1 WHERE name = 'effects'`)
	}
	if err != nil {
		return realtime.Result{}, err
	}
	changes, _ := json.Marshal([]Change{ch})
	var body any = is
	if !put {
		body = map[string]any{"id": is.ID, "deleted": true}
	}
	resp, err := receiver.JSON(http.StatusOK, body)
	return realtime.Result{Response: resp, Changes: changes}, err
}

func problemResult(status int, typ, title, detail string) realtime.Result {
	return realtime.Result{Response: receiver.ProblemResponse(receiver.Problem{Type: typ, Title: title, Status: status, Detail: detail})}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// snapshot answers GET /realtime/snapshot: the caller's issues and the
// version they are at least as new as. The version is read first: a
// write that commits between the two reads is then in the issues and in
// a delta after the version, which the client applies again, harmlessly
// (puts and deletes of whole records).
func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	user, err := demoScope(r)
	if err != nil {
		writeJSONProblem(w, receiver.Problem{Type: wire.ProblemUnauthenticated, Title: "Authentication required",
			Status: http.StatusUnauthorized, Detail: "The demo takes the user from the " + DemoUserHeader + " header or its cookie."})
		return
	}
	snap := Snapshot{Changes: []Change{}}
	err = s.store.View(r.Context(), func(q receiver.Tx) error {
		v, err := s.feed.Head(r.Context(), q, user)
		if err != nil {
			return err
		}
		snap.Version = v
		rows, err := q.Query(r.Context(), `SELECT id, title, done, by_user, updated_at FROM demo_issues
			WHERE user_id = $1 ORDER BY id LIMIT $2`, user, snapshotLimit+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var is Issue
			var done int64
			if err := rows.Scan(&is.ID, &is.Title, &done, &is.By, &is.UpdatedAt); err != nil {
				return err
			}
			is.Done = done != 0
			if len(snap.Changes) == snapshotLimit {
				return errSnapshotTooLarge
			}
			snap.Changes = append(snap.Changes, Change{Store: IssueStore, Key: is.ID, Value: &is})
		}
		return rows.Err()
	})
	if errors.Is(err, errSnapshotTooLarge) {
		writeJSONProblem(w, receiver.Problem{Type: wire.ProblemBase + "snapshot-too-large", Title: "Too many issues for a snapshot",
			Status: http.StatusInsufficientStorage, Detail: "The demo snapshots at most 10000 issues per user."})
		return
	}
	if err != nil {
		s.log.Error("snapshot", "err", err)
		writeJSONProblem(w, receiver.Problem{Type: wire.ProblemInternal, Title: "Internal server error", Status: 500})
		return
	}
	writeJSON(w, snap)
}

// signOut answers POST /api/signout: the demo's sign-out ends the caller's
// realtime connections with 4401 (an open socket is not authenticated
// again) and clears the demo cookie. DEMO ONLY, like the demo's users.
// EndSession is per user and per instance: every device of the user is
// disconnected, and another instance's sockets stay open.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request) {
	user, err := demoScope(r)
	if err != nil {
		writeJSONProblem(w, receiver.Problem{Type: wire.ProblemUnauthenticated, Title: "Authentication required",
			Status: http.StatusUnauthorized, Detail: "The demo takes the user from the " + DemoUserHeader + " header or its cookie."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: DemoUserCookie, Value: "", Path: "/", MaxAge: -1})
	writeJSON(w, map[string]int{"closed": s.rt.EndSession(user)})
}
