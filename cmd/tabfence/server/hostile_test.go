package server_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/pgstore/pgtest"
	"github.com/tabfence/tabfence/wire"
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
		require.Equal(t, 422, resp.StatusCode, "%q: %d %s, want 422 %s", c.body, resp.StatusCode, b, c.problem)
		require.Equal(t, c.problem, p.Type, "%q: %d %s, want 422 %s", c.body, resp.StatusCode, b, c.problem)
	}
	_, b := call(t, "GET", base+"/api/notes", "ann", "", "")
	require.Equal(t, "[]", string(b), "notes stored from refused bodies: %s", b)
	// A surrogate pair and an escaped backslash before "u" are fine.
	resp, b := call(t, "POST", base+"/api/notes", "ann", "pair", `{"id":"\ud83c\udf89","text":"\\ud800"}`)
	var n server.Note
	require.Equal(t, 201, resp.StatusCode, "surrogate pair: %d %s", resp.StatusCode, b)
	require.NoError(t, json.Unmarshal(b, &n), "surrogate pair: %d %s", resp.StatusCode, b)
	require.Equal(t, "🎉", n.ID, "surrogate pair: %d %s", resp.StatusCode, b)
	require.Equal(t, `\ud800`, n.Text, "surrogate pair: %d %s", resp.StatusCode, b)
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

// Through the whole server, a body trickled to any route, the receiver's or
// not, is cut off after BodyTimeout.
func TestSlowBodyCutOffOnEveryRoute(t *testing.T) {
	srv, err := server.New(server.Config{DB: filepath.Join(t.TempDir(), "s.db"), Dist: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Receiver: receiver.Options{BodyTimeout: 300 * time.Millisecond}})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); _ = srv.Close() })
	for _, target := range []string{"POST /api/notes", "GET /api/notes", "POST /fence/doc:1", "GET /healthz"} {
		conn, err := net.Dial("tcp", hs.Listener.Addr().String())
		require.NoError(t, err)
		method, path, _ := strings.Cut(target, " ")
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: x\r\n%s: ann\r\n%s: k\r\nContent-Length: 1000\r\n\r\n",
			method, path, server.DemoUserHeader, wire.HeaderIdempotencyKey)
		start := time.Now()
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.Copy(io.Discard, conn) // any answer, then the server's close
		close(stop)
		_ = conn.Close()
		if err != nil && !errors.Is(err, syscall.ECONNRESET) { // a reset is a close with our bytes unread
			t.Fatalf("%s: connection still open after 5s: %v", target, err)
		}
		d := time.Since(start)
		require.GreaterOrEqual(t, d, 250*time.Millisecond, "%s: closed after %s, before the deadline", target, d)
	}
}

// Two instances of the server started at once on a fresh PostgreSQL
// database both come up (they race to create the demo's tables).
func TestInstancesStartTogetherPostgres(t *testing.T) {
	for round := 0; round < 5; round++ {
		url := pgtest.SchemaURL(t)
		errs := make(chan error, 2)
		for i := 0; i < 2; i++ {
			go func() {
				srv, err := server.New(server.Config{DB: url, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err == nil {
					err = srv.Close()
				}
				errs <- err
			}()
		}
		for i := 0; i < 2; i++ {
			require.NoError(t, <-errs, "round %d: an instance failed to start", round)
		}
	}
}
