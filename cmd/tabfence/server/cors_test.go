package server_test

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/wire"
)

func corsServer(t *testing.T, origins ...string) *httptest.Server {
	t.Helper()
	dist := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dist, "tabfence.wasm"), []byte("\x00asm"), 0o644))
	srv, err := server.New(server.Config{DB: filepath.Join(t.TempDir(), "db"), Dist: dist, AllowOrigins: origins,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); _ = srv.Close() })
	return hs
}

func do(t *testing.T, method, url string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(`{"id":"n","text":"t"}`))
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

const app = "https://app.example"

func TestCORSPreflightForTheAPIAndFence(t *testing.T) {
	hs := corsServer(t, app)
	for _, p := range []string{"/api/notes", "/fence/r1", "/realtime/snapshot", "/dist/tabfence.wasm"} {
		resp := do(t, "OPTIONS", hs.URL+p, "Origin", app, "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "content-type, idempotency-key, x-demo-user, authorization")
		require.Equal(t, http.StatusNoContent, resp.StatusCode, p)
		h := resp.Header
		assert.Equal(t, app, h.Get("Access-Control-Allow-Origin"), p)
		assert.Equal(t, "true", h.Get("Access-Control-Allow-Credentials"), p)
		assert.Contains(t, h.Get("Access-Control-Allow-Methods"), "POST", p)
		assert.Equal(t, "content-type, idempotency-key, x-demo-user, authorization", h.Get("Access-Control-Allow-Headers"), p)
		assert.Contains(t, h.Values("Vary"), "Origin", p)
	}
	// The answer itself: marked for the page, with the headers the outbox reads.
	resp := do(t, "POST", hs.URL+"/api/notes", "Origin", app, server.DemoUserHeader, "u", wire.HeaderIdempotencyKey, `"k1"`)
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Contains(t, resp.Header.Get("Access-Control-Expose-Headers"), wire.HeaderReplayed)
	assert.Contains(t, resp.Header.Get("Access-Control-Expose-Headers"), wire.HeaderFencingHighest)
	assert.Contains(t, resp.Header.Get("Access-Control-Expose-Headers"), wire.HeaderRetryAfter)
	// The demo pages are not for other origins.
	resp = do(t, "GET", hs.URL+"/", "Origin", app)
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}

func TestCORSRefusesOtherOrigins(t *testing.T) {
	hs := corsServer(t, app)
	for _, origin := range []string{"https://evil.example", "null", "https://app.example.evil", "http://app.example", app + ":443x"} {
		resp := do(t, "OPTIONS", hs.URL+"/api/notes", "Origin", origin, "Access-Control-Request-Method", "POST")
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, origin)
		assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), origin)
		resp = do(t, "GET", hs.URL+"/api/effects", "Origin", origin)
		assert.Equal(t, http.StatusOK, resp.StatusCode, origin)
		assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), origin)
	}
	// Without the option, no origin but the server's own.
	plain := corsServer(t)
	resp := do(t, "OPTIONS", plain.URL+"/api/notes", "Origin", app, "Access-Control-Request-Method", "POST")
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.NotEqual(t, http.StatusNoContent, resp.StatusCode)
}

func TestCORSAnyOriginSendsNoCredentials(t *testing.T) {
	hs := corsServer(t, "*")
	resp := do(t, "OPTIONS", hs.URL+"/fence/r", "Origin", "https://x.example", "Access-Control-Request-Method", "POST")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	assert.Equal(t, "*", resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Empty(t, resp.Header.Get("Access-Control-Allow-Credentials"))
}

func TestCORSHostileHeaders(t *testing.T) {
	hs := corsServer(t, app)
	for _, rh := range []string{"x-a/b{}", "x-a\tb", strings.Repeat("a,", 2000), "x-a;evil", "\"quoted\""} {
		resp := do(t, "OPTIONS", hs.URL+"/api/notes", "Origin", app, "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", rh)
		assert.Equal(t, http.StatusNoContent, resp.StatusCode, "%.30q", rh)
		assert.Empty(t, resp.Header.Get("Access-Control-Allow-Headers"), "%.30q: never echoed", rh)
	}
	for _, bad := range []string{"app.example", "https://app.example/", "https://app.example/x", "ftp://app.example", "https://u@app.example", "https://app.example?", ""} {
		_, err := server.New(server.Config{DB: filepath.Join(t.TempDir(), "db"), AllowOrigins: []string{bad}})
		assert.True(t, errors.Is(err, server.ErrBadOrigin), "%q: %v", bad, err)
	}
}

// Browsers send an origin without its scheme's default port: an allowed
// origin written with one still matches.
func TestCORSDefaultPortIsNormalized(t *testing.T) {
	hs := corsServer(t, "https://app.example:443", "HTTP://Other.Example:80", "http://dev.example:8080", "http://[::1]:80")
	for _, origin := range []string{app, "http://other.example", "http://dev.example:8080", "http://[::1]"} {
		resp := do(t, "OPTIONS", hs.URL+"/api/notes", "Origin", origin, "Access-Control-Request-Method", "POST")
		require.Equal(t, http.StatusNoContent, resp.StatusCode, origin)
		assert.Equal(t, origin, resp.Header.Get("Access-Control-Allow-Origin"), origin)
	}
	resp := do(t, "OPTIONS", hs.URL+"/api/notes", "Origin", "http://dev.example", "Access-Control-Request-Method", "POST")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a port that is not the default stays part of the origin")
}

// Browsers send a non-ASCII host as punycode: the Unicode spelling could
// never match, so it is refused, and the punycode one works.
func TestCORSNonASCIIHostIsRefused(t *testing.T) {
	for _, bad := range []string{"https://bücher.example", "https://app.exämple:8443", "https://b%C3%BCcher.example"} {
		_, err := server.New(server.Config{DB: filepath.Join(t.TempDir(), "db"), AllowOrigins: []string{bad}})
		require.True(t, errors.Is(err, server.ErrBadOrigin), "%q: %v", bad, err)
		assert.Contains(t, err.Error(), "punycode", bad)
	}
	hs := corsServer(t, "https://xn--bcher-kva.example")
	resp := do(t, "OPTIONS", hs.URL+"/api/notes", "Origin", "https://xn--bcher-kva.example", "Access-Control-Request-Method", "POST")
	assert.Equal(t, http.StatusNoContent, resp.StatusCode)
}
