package assets

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var built = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func distFS() fstest.MapFS {
	file := func(s string, t time.Time) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s), ModTime: t} }
	return fstest.MapFS{
		"tabfence.wasm":           file("\x00asm module bytes", built),
		"tabfence.wasm.br":        file("brotli bytes", built),
		"tabfence.wasm.gz":        file("gzip bytes", built),
		"tabfence.wasm.br.sha256": file(sumOf("\x00asm module bytes")+"\n", built),
		"tabfence.wasm.gz.sha256": file(sumOf("\x00asm module bytes")+"\n", built),
		"tabfence.js":             file("export {}", built),
		"old.wasm":                file("\x00asm new build", built),
		"old.wasm.br":             file("brotli of the previous build", built.Add(-time.Minute)),
		"index.html":              file("<!doctype html>", built),
		"sub/file.txt":            file("text", built),
		"tabfence.d.ts":           file("export {}", built),
		"tabfence.wasm.br.gz":     file("never asked for", built),
	}
}

func get(t *testing.T, h http.Handler, method, target string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, "/", nil)
	r.URL.Path, r.URL.RawQuery, _ = strings.Cut(target, "?") // raw: httptest.NewRequest rejects some hostile paths itself
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func sumOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func etagOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}

func TestNegotiatesContentEncoding(t *testing.T) {
	h := New(distFS())
	cases := []struct{ accept, coding, body string }{
		{"br, gzip, deflate", "br", "brotli bytes"},
		{"gzip, deflate, br, zstd", "br", "brotli bytes"},
		{"gzip", "gzip", "gzip bytes"},
		{"GZIP;Q=0.5", "gzip", "gzip bytes"},
		{"br;q=0.4, gzip;q=0.8", "gzip", "gzip bytes"},
		{"br;q=0, gzip", "gzip", "gzip bytes"},
		{"*", "br", "brotli bytes"},
		{"*;q=0, gzip", "gzip", "gzip bytes"},
		{"", "", "\x00asm module bytes"},
		{"identity", "", "\x00asm module bytes"},
		{"br;q=0, gzip;q=0", "", "\x00asm module bytes"},
		{"deflate, zstd", "", "\x00asm module bytes"},
	}
	for _, c := range cases {
		w := get(t, h, "GET", "/tabfence.wasm", "Accept-Encoding", c.accept)
		require.Equal(t, http.StatusOK, w.Code, "%q", c.accept)
		assert.Equal(t, c.coding, w.Header().Get("Content-Encoding"), "%q", c.accept)
		assert.Equal(t, c.body, w.Body.String(), "%q", c.accept)
		assert.Equal(t, "application/wasm", w.Header().Get("Content-Type"), "%q", c.accept)
		assert.Contains(t, w.Header().Values("Vary"), "Accept-Encoding", "%q", c.accept)
		assert.Equal(t, "no-cache", w.Header().Get("Cache-Control"), "%q", c.accept)
		assert.Equal(t, etagOf(c.body), w.Header().Get("ETag"), "%q: the ETag of the bytes served", c.accept)
	}
}

// A compressed copy older than the file is from an earlier build: serving
// it would hand the browser the old module.
func TestStaleCompressedCopyIsNotServed(t *testing.T) {
	w := get(t, New(distFS()), "GET", "/old.wasm", "Accept-Encoding", "br")
	assert.Equal(t, "", w.Header().Get("Content-Encoding"))
	assert.Equal(t, "\x00asm new build", w.Body.String())
}

func TestIfNoneMatchAnswers304(t *testing.T) {
	h := New(distFS())
	first := get(t, h, "GET", "/tabfence.wasm", "Accept-Encoding", "br")
	etag := first.Header().Get("ETag")
	require.NotEmpty(t, etag)
	require.False(t, strings.HasPrefix(etag, "W/"), "a strong ETag")

	again := get(t, h, "GET", "/tabfence.wasm", "Accept-Encoding", "br", "If-None-Match", etag)
	assert.Equal(t, http.StatusNotModified, again.Code)
	assert.Empty(t, again.Body.Bytes())
	assert.Equal(t, etag, again.Header().Get("ETag"))
	assert.Equal(t, "no-cache", again.Header().Get("Cache-Control"))

	// The gzip copy is another representation: the brotli ETag does not
	// match it, and a browser that switched codings gets the bytes.
	gz := get(t, h, "GET", "/tabfence.wasm", "Accept-Encoding", "gzip", "If-None-Match", etag)
	assert.Equal(t, http.StatusOK, gz.Code)
	assert.Equal(t, "gzip bytes", gz.Body.String())

	list := get(t, h, "GET", "/tabfence.wasm", "Accept-Encoding", "br", "If-None-Match", `"x", `+etag)
	assert.Equal(t, http.StatusNotModified, list.Code)

	head := get(t, h, "HEAD", "/tabfence.wasm", "Accept-Encoding", "br")
	assert.Equal(t, http.StatusOK, head.Code)
	assert.Empty(t, head.Body.Bytes())
	assert.Equal(t, etag, head.Header().Get("ETag"))
}

func TestContentTypes(t *testing.T) {
	h := New(distFS())
	for p, want := range map[string]string{
		"/tabfence.js":   "text/javascript; charset=utf-8",
		"/tabfence.d.ts": "text/plain; charset=utf-8",
		"/":              "text/html; charset=utf-8",
		"/sub/file.txt":  "text/plain; charset=utf-8",
	} {
		w := get(t, h, "GET", p)
		require.Equal(t, http.StatusOK, w.Code, p)
		assert.Equal(t, want, w.Header().Get("Content-Type"), p)
	}
}

func TestHostileRequests(t *testing.T) {
	h := New(distFS())
	for _, p := range []string{"/sub/", "/sub", "/../tabfence.wasm.secret", "/nope.wasm", "/\xff.wasm", "/a\x00b", "/tabfence.wasm/"} {
		w := get(t, h, "GET", p)
		assert.Equal(t, http.StatusNotFound, w.Code, "%q", p)
	}
	// ".." is cleaned inside the root, never above it.
	w := get(t, h, "GET", "/sub/../tabfence.js")
	assert.Equal(t, "export {}", w.Body.String())

	w = get(t, h, "POST", "/tabfence.wasm")
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Equal(t, "GET, HEAD", w.Header().Get("Allow"))

	for _, accept := range []string{
		strings.Repeat("x,", 100000) + "br",
		"br;q=NaN", "br;q=abc", "br;q=2", "br;q=-1", "br;q=0.0000000001", ";;;,,,", "br;q", "br;=1;q=",
		strings.Repeat(";", 10000),
	} {
		w := get(t, h, "GET", "/tabfence.wasm", "Accept-Encoding", accept)
		require.Equal(t, http.StatusOK, w.Code, "%.40q", accept)
		assert.Equal(t, "", w.Header().Get("Content-Encoding"), "%.40q: not an acceptable brotli", accept)
		assert.Equal(t, "\x00asm module bytes", w.Body.String())
	}
}

// A change to the file is a new ETag, without restarting the server.
func TestETagFollowsTheFile(t *testing.T) {
	fsys := distFS()
	h := New(fsys)
	a := get(t, h, "GET", "/tabfence.js").Header().Get("ETag")
	fsys["tabfence.js"] = &fstest.MapFile{Data: []byte("export const v = 2"), ModTime: built.Add(time.Second)}
	w := get(t, h, "GET", "/tabfence.js", "If-None-Match", a)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.NotEqual(t, a, w.Header().Get("ETag"))
	b, _ := io.ReadAll(w.Body)
	assert.Equal(t, "export const v = 2", string(b))
}

// A content-hashed name (v= the file's hash, as the served loader names its
// files) is immutable; any other v is revalidated like the plain name.
func TestHashedNamesAreImmutable(t *testing.T) {
	h := New(distFS())
	v := etagOf("\x00asm module bytes")[1:17]
	w := get(t, h, "GET", "/tabfence.wasm?v="+v, "Accept-Encoding", "br")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "public, max-age=31536000, immutable", w.Header().Get("Cache-Control"))
	assert.Equal(t, "brotli bytes", w.Body.String(), "the hash names the file; the copy served is still negotiated")
	for _, q := range []string{"v=0123456789abcdef", "v=" + v[:15], "v=" + v + "&v=" + v, "w=" + v, "v=" + v + "0", "v=%zz"} {
		w := get(t, h, "GET", "/tabfence.wasm?"+q, "Accept-Encoding", "br")
		assert.Equal(t, http.StatusOK, w.Code, q)
		assert.Equal(t, "no-cache", w.Header().Get("Cache-Control"), q)
	}
}
