package assets

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// After a deploy that gives every file the same time (cp -r, a checkout,
// an unzip), a copy left from an earlier build is not older than the new
// file: only its recorded source hash tells it apart. It is never served,
// least of all under the new hash as immutable.
func TestCopyOfAnotherBuildIsNotServed(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s), ModTime: built} }
	fsys := fstest.MapFS{
		"m.wasm":           file("\x00asm new build"),
		"m.wasm.br":        file("brotli of the previous build"),
		"m.wasm.br.sha256": file(sumOf("\x00asm previous build") + "\n"),
		"m.wasm.gz":        file("gzip of the new build"),
		"m.wasm.gz.sha256": file(sumOf("\x00asm new build") + "\n"),
		"n.wasm":           file("\x00asm n"),
		"n.wasm.br":        file("brotli of who knows what"), // no sidecar
	}
	h := New(fsys)
	v := sumOf("\x00asm new build")[:16]
	w := get(t, h, "GET", "/m.wasm?v="+v, "Accept-Encoding", "br, gzip")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "gzip", w.Header().Get("Content-Encoding"), "the next acceptable coding whose copy is of this file")
	assert.Equal(t, "gzip of the new build", w.Body.String())
	assert.Equal(t, "public, max-age=31536000, immutable", w.Header().Get("Cache-Control"))

	w = get(t, h, "GET", "/m.wasm?v="+v, "Accept-Encoding", "br")
	assert.Equal(t, "", w.Header().Get("Content-Encoding"))
	assert.Equal(t, "\x00asm new build", w.Body.String())

	w = get(t, h, "GET", "/n.wasm", "Accept-Encoding", "br")
	assert.Equal(t, "", w.Header().Get("Content-Encoding"), "a copy of unknown source")
	assert.Equal(t, "\x00asm n", w.Body.String())
}

// New bytes of the same size under the old time (a deploy that keeps
// times) are a new ETag and a new hash, in a server that keeps running.
func TestHashFollowsTheBytesNotTheTime(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.wasm")
	require.NoError(t, os.WriteFile(p, []byte("\x00asm build one"), 0o644))
	info, err := os.Stat(p)
	require.NoError(t, err)
	h := New(os.DirFS(dir))
	a := get(t, h, "GET", "/m.wasm")
	require.Equal(t, etagOf("\x00asm build one"), a.Header().Get("ETag"))

	require.NoError(t, os.WriteFile(p, []byte("\x00asm build two"), 0o644))
	require.NoError(t, os.Chtimes(p, info.ModTime(), info.ModTime()))
	w := get(t, h, "GET", "/m.wasm?v="+sumOf("\x00asm build two")[:16], "If-None-Match", a.Header().Get("ETag"))
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, etagOf("\x00asm build two"), w.Header().Get("ETag"))
	assert.Equal(t, "public, max-age=31536000, immutable", w.Header().Get("Cache-Control"))
	assert.Equal(t, "\x00asm build two", w.Body.String())
}

// brokenFS serves the files of a MapFS, the compressed copies broken: not
// seekable, or failing to read.
type brokenFS struct {
	fstest.MapFS
	unreadable bool
}

type unseekable struct{ fs.File }

type unreadable struct{ fs.File }

func (unreadable) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func (b brokenFS) Open(name string) (fs.File, error) {
	f, err := b.MapFS.Open(name)
	if err != nil || !strings.HasSuffix(name, ".br") {
		return f, err
	}
	if b.unreadable {
		return unreadable{f}, nil
	}
	return unseekable{f}, nil
}

// An error answer is plain text: no Content-Encoding (the browser would
// decode the message as brotli), no ETag, and never cached for a year.
func TestErrorAnswersAreNotCodedOrCached(t *testing.T) {
	v := etagOf("\x00asm module bytes")[1:17]
	for _, broken := range []bool{false, true} {
		h := New(brokenFS{MapFS: distFS(), unreadable: broken})
		w := get(t, h, "GET", "/tabfence.wasm?v="+v, "Accept-Encoding", "br")
		require.Equal(t, http.StatusInternalServerError, w.Code, "unreadable %v", broken)
		assert.Empty(t, w.Header().Get("Content-Encoding"), "unreadable %v", broken)
		assert.Empty(t, w.Header().Get("ETag"), "unreadable %v", broken)
		assert.NotContains(t, w.Header().Get("Cache-Control"), "immutable", "unreadable %v", broken)
		assert.Equal(t, "text/plain; charset=utf-8", w.Header().Get("Content-Type"), "unreadable %v", broken)
	}
}

// x-gzip is gzip (RFC 9110 §8.4.1.3).
func TestXGzipIsGzip(t *testing.T) {
	h := New(distFS())
	for _, accept := range []string{"x-gzip", "X-GZIP;q=0.5", "br;q=0.1, x-gzip"} {
		w := get(t, h, "GET", "/tabfence.wasm", "Accept-Encoding", accept)
		assert.Equal(t, "gzip", w.Header().Get("Content-Encoding"), accept)
		assert.Equal(t, "gzip bytes", w.Body.String(), accept)
	}
}
