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

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/receiver/pgstore/pgtest"
	"github.com/tabfence/tabfence/wire"
)

func newServer(t *testing.T, db string) (*httptest.Server, string) {
	t.Helper()
	dist := t.TempDir()
	if err := os.WriteFile(filepath.Join(dist, "tabfence.wasm"), []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{DB: db, Dist: dist, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
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
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("effects %s: %v", b, err)
	}
	return out.Effects
}

func testDemoAPI(t *testing.T, db string) {
	hs, _ := newServer(t, db)
	base := hs.URL
	resp, b := call(t, "POST", base+"/api/notes", "ann", "n1", `{"id":"a","text":"hello"}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, b)
	}
	resp, _ = call(t, "POST", base+"/api/notes", "ann", "n1", `{"id":"a","text":"hello"}`)
	if resp.StatusCode != 201 || resp.Header.Get(wire.HeaderReplayed) != "true" {
		t.Fatalf("retry: %d replayed=%q", resp.StatusCode, resp.Header.Get(wire.HeaderReplayed))
	}
	resp, b = call(t, "POST", base+"/api/notes", "ann", "n2", `{"id":"a","text":"edited"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("update: %d %s", resp.StatusCode, b)
	}
	if resp, _ := call(t, "POST", base+"/api/notes", "ann", "", `{"id":"a","text":"x"}`); resp.StatusCode != 400 {
		t.Fatalf("no key: %d", resp.StatusCode)
	}
	if resp, _ := call(t, "POST", base+"/api/notes", "", "n3", `{"id":"a","text":"x"}`); resp.StatusCode != 401 {
		t.Fatalf("no user: %d", resp.StatusCode)
	}
	if resp, _ := call(t, "POST", base+"/api/notes", "ann", "n4", `{"text":"x"}`); resp.StatusCode != 422 {
		t.Fatalf("invalid note: %d", resp.StatusCode)
	}
	if resp, _ := call(t, "POST", base+"/api/notes", "ann", "n5", `nope`); resp.StatusCode != 400 {
		t.Fatalf("bad json: %d", resp.StatusCode)
	}
	_, b = call(t, "GET", base+"/api/notes", "ann", "", "")
	var notes []server.Note
	if err := json.Unmarshal(b, &notes); err != nil || len(notes) != 1 || notes[0] != (server.Note{ID: "a", Text: "edited", Effects: 2, User: "ann"}) {
		t.Fatalf("notes %s (%v)", b, err)
	}
	_, b = call(t, "GET", base+"/api/notes", "bob", "", "")
	if string(b) != "[]" {
		t.Fatalf("bob sees %s", b)
	}
	if resp, _ := call(t, "GET", base+"/api/notes", "", "", ""); resp.StatusCode != 401 {
		t.Fatalf("list without user: %d", resp.StatusCode)
	}
	if n := effects(t, base); n != 2 {
		t.Fatalf("effects %d, want 2", n)
	}
	// Fencing through the demo API.
	_, b = call(t, "POST", base+"/fence/notes:ann", "ann", "", "")
	var ft struct {
		Resource string
		Token    uint64
	}
	if err := json.Unmarshal(b, &ft); err != nil || ft.Resource != "notes:ann" || ft.Token != 1 {
		t.Fatalf("fence %s", b)
	}
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
	if n := effects(t, base); n != 3 {
		t.Fatalf("effects %d after 20 concurrent retries, want 3", n)
	}
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
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/wasm" ||
		resp.Header.Get("Cache-Control") != "no-cache" || !bytes.Equal(b, []byte("\x00asm")) {
		t.Fatalf("wasm: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = call(t, "GET", hs.URL+"/", "", "", "")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("index: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := call(t, "GET", hs.URL+"/dist/missing.js", "", "", ""); resp.StatusCode != 404 {
		t.Fatalf("missing: %d", resp.StatusCode)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	if resp, _ := call(t, "GET", hs.URL+"/test/fail", "", "", ""); resp.StatusCode != 503 {
		t.Fatalf("injected route: %d", resp.StatusCode)
	}
	if effects(t, hs.URL) != 0 || seen != 2 {
		t.Fatalf("middleware saw %d requests", seen)
	}
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
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := post("cy", "", "cy", "k1", "c1"); s != 201 {
		t.Fatalf("cookie: %d", s)
	}
	if s := post("cy", "", "ann", "k2", "a1"); s != 403 {
		t.Fatalf("ann's record with cy's cookie: %d, want 403", s)
	}
	if s := post("cy", "ann", "ann", "k3", "a2"); s != 201 {
		t.Fatalf("header over cookie: %d", s)
	}
	list := func(user string) string {
		_, b := call(t, "GET", hs.URL+"/api/notes", user, "", "")
		return string(b)
	}
	if l := list("cy"); !strings.Contains(l, `"c1"`) || strings.Contains(l, `"a1"`) || strings.Contains(l, `"a2"`) {
		t.Fatalf("cy's notes %s", l)
	}
	if l := list("ann"); !strings.Contains(l, `"a2"`) || strings.Contains(l, `"a1"`) {
		t.Fatalf("ann's notes %s", l)
	}
}
