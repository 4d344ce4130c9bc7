package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/receiver/pgstore/pgtest"
	"github.com/tabfence/tabfence/wire"
)

func newServer(t *testing.T, db string) (*httptest.Server, string) {
	t.Helper()
	dist := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dist, "tabfence.wasm"), []byte("\x00asm"), 0o644))
	srv, err := server.New(server.Config{DB: db, Dist: dist, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); _ = srv.Close() })
	return hs, dist
}

func call(t *testing.T, method, url, user, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if user != "" {
		req.Header.Set(server.DemoUserHeader, user)
	}
	if key != "" {
		req.Header.Set(wire.HeaderIdempotencyKey, key)
	}
	resp, err := http.DefaultClient.Do(req)
	// t.Fatal, not require: call runs in goroutines too.
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func effects(t *testing.T, base string) int64 {
	t.Helper()
	_, b := call(t, "GET", base+"/api/effects", "", "", "")
	var out struct{ Effects int64 }
	require.NoError(t, json.Unmarshal(b, &out), "effects %s", b)
	return out.Effects
}

func testDemoAPI(t *testing.T, db string) {
	hs, _ := newServer(t, db)
	base := hs.URL
	resp, b := call(t, "POST", base+"/api/notes", "ann", "n1", `{"id":"a","text":"hello"}`)
	require.Equal(t, 201, resp.StatusCode, "create: %d %s", resp.StatusCode, b)
	resp, _ = call(t, "POST", base+"/api/notes", "ann", "n1", `{"id":"a","text":"hello"}`)
	require.Equal(t, 201, resp.StatusCode, "retry: %d replayed", resp.StatusCode)
	require.Equal(t, "true", resp.Header.Get(wire.HeaderReplayed), "retry: %d replayed", resp.StatusCode)
	resp, b = call(t, "POST", base+"/api/notes", "ann", "n2", `{"id":"a","text":"edited"}`)
	require.Equal(t, 200, resp.StatusCode, "update: %d %s", resp.StatusCode, b)
	resp, _ = call(t, "POST", base+"/api/notes", "ann", "", `{"id":"a","text":"x"}`)
	require.Equal(t, 400, resp.StatusCode, "no key")
	resp, _ = call(t, "POST", base+"/api/notes", "", "n3", `{"id":"a","text":"x"}`)
	require.Equal(t, 401, resp.StatusCode, "no user")
	resp, _ = call(t, "POST", base+"/api/notes", "ann", "n4", `{"text":"x"}`)
	require.Equal(t, 422, resp.StatusCode, "invalid note")
	resp, _ = call(t, "POST", base+"/api/notes", "ann", "n5", `nope`)
	require.Equal(t, 400, resp.StatusCode, "bad json")
	_, b = call(t, "GET", base+"/api/notes", "ann", "", "")
	var notes []server.Note
	err := json.Unmarshal(b, &notes)
	require.NoError(t, err, "notes %s (%v)", b, err)
	require.Len(t, notes, 1, "notes %s (%v)", b, err)
	require.Equal(t, server.Note{ID: "a", Text: "edited", Effects: 2, User: "ann"}, notes[0], "notes %s (%v)", b, err)
	_, b = call(t, "GET", base+"/api/notes", "bob", "", "")
	require.Equal(t, "[]", string(b), "bob sees %s", b)
	resp, _ = call(t, "GET", base+"/api/notes", "", "", "")
	require.Equal(t, 401, resp.StatusCode, "list without user")
	n := effects(t, base)
	require.Equal(t, int64(2), n, "effects %d, want 2", n)
	// Fencing through the demo API.
	_, b = call(t, "POST", base+"/fence/notes:ann", "ann", "", "")
	var ft struct {
		Resource string
		Token    uint64
	}
	require.NoError(t, json.Unmarshal(b, &ft), "fence %s", b)
	require.Equal(t, "notes:ann", ft.Resource, "fence %s", b)
	require.Equal(t, uint64(1), ft.Token, "fence %s", b)
	// Exactly once under concurrency.
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			call(t, "POST", base+"/api/notes", "ann", "hot", `{"id":"hot","text":"x"}`)
		}()
	}
	wg.Wait()
	n = effects(t, base)
	require.Equal(t, int64(3), n, "effects %d after 20 concurrent retries, want 3", n)
}

func TestDemoAPISQLite(t *testing.T) {
	t.Parallel()
	testDemoAPI(t, filepath.Join(t.TempDir(), "d", "demo.db"))
}

func TestDemoAPIPostgres(t *testing.T) {
	t.Parallel()
	testDemoAPI(t, pgtest.SchemaURL(t))
}

func TestStatic(t *testing.T) {
	hs, _ := newServer(t, filepath.Join(t.TempDir(), "demo.db"))
	resp, b := call(t, "GET", hs.URL+"/dist/tabfence.wasm", "", "", "")
	require.Equal(t, 200, resp.StatusCode, "wasm: %d %v", resp.StatusCode, resp.Header)
	require.Equal(t, "application/wasm", resp.Header.Get("Content-Type"), "wasm: %d %v", resp.StatusCode, resp.Header)
	require.Equal(t, "no-cache", resp.Header.Get("Cache-Control"), "wasm: %d %v", resp.StatusCode, resp.Header)
	require.True(t, bytes.Equal(b, []byte("\x00asm")), "wasm: %d %v", resp.StatusCode, resp.Header)
	resp, _ = call(t, "GET", hs.URL+"/", "", "", "")
	require.Equal(t, 200, resp.StatusCode, "index: %d %v", resp.StatusCode, resp.Header)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html"), "index: %d %v", resp.StatusCode, resp.Header)
	resp, _ = call(t, "GET", hs.URL+"/dist/missing.js", "", "", "")
	require.Equal(t, 404, resp.StatusCode, "missing")
}

func TestMiddleware(t *testing.T) {
	var seen int
	var mu sync.Mutex
	srv, err := server.New(server.Config{
		DB:     filepath.Join(t.TempDir(), "m.db"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Middleware: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen++
				mu.Unlock()
				if r.URL.Path == "/test/fail" {
					http.Error(w, "injected", 503)
					return
				}
				next.ServeHTTP(w, r)
			})
		},
	})
	require.NoError(t, err)
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	resp, _ := call(t, "GET", hs.URL+"/test/fail", "", "", "")
	require.Equal(t, 503, resp.StatusCode, "injected route")
	require.Equal(t, int64(0), effects(t, hs.URL), "middleware saw %d requests", seen)
	require.Equal(t, 2, seen, "middleware saw %d requests", seen)
}

// The demo's cookie credentials (auth=cookie): the cookie names the caller
// when X-Demo-User is absent, the header wins when both are sent, and the
// receiver's session check compares the outbox's X-Client-User with it.
func TestDemoCookieAuth(t *testing.T) {
	hs, _ := newServer(t, filepath.Join(t.TempDir(), "demo.db"))
	post := func(cookie, header, clientUser, key, id string) int {
		req, _ := http.NewRequest("POST", hs.URL+"/api/notes", strings.NewReader(`{"id":"`+id+`","text":"t"}`))
		req.Header.Set(wire.HeaderIdempotencyKey, key)
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: server.DemoUserCookie, Value: cookie})
		}
		if header != "" {
			req.Header.Set(server.DemoUserHeader, header)
		}
		if clientUser != "" {
			req.Header.Set(wire.HeaderClientUser, clientUser)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, 201, post("cy", "", "cy", "k1", "c1"), "cookie")
	s := post("cy", "", "ann", "k2", "a1")
	require.Equal(t, 403, s, "ann's record with cy's cookie: %d, want 403", s)
	require.Equal(t, 201, post("cy", "ann", "ann", "k3", "a2"), "header over cookie")
	list := func(user string) string {
		_, b := call(t, "GET", hs.URL+"/api/notes", user, "", "")
		return string(b)
	}
	l := list("cy")
	require.Contains(t, l, `"c1"`, "cy's notes")
	require.NotContains(t, l, `"a1"`, "cy's notes")
	require.NotContains(t, l, `"a2"`, "cy's notes")
	l = list("ann")
	require.Contains(t, l, `"a2"`, "ann's notes")
	require.NotContains(t, l, `"a1"`, "ann's notes")
}

// The demo's Service Worker is served at the root (its default scope is
// then the whole demo, no Service-Worker-Allowed needed) as JavaScript, a
// type browsers require of a worker script, beside the options module it
// shares with the pages.
func TestServesTheDemoWorker(t *testing.T) {
	hs, _ := newServer(t, filepath.Join(t.TempDir(), "demo.db"))
	for _, p := range []string{"/sw.js?outbox=notes&protocol=2", "/notes-options.js"} {
		resp, b := call(t, "GET", hs.URL+p, "", "", "")
		require.Equal(t, 200, resp.StatusCode, "%s: %d %v", p, resp.StatusCode, resp.Header)
		require.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"), "%s", p)
		require.Empty(t, resp.Header.Get("Service-Worker-Allowed"), "%s", p)
		require.Contains(t, string(b), "notesOptions", "%s", p)
	}
}
