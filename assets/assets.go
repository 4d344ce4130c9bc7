// Package assets serves the tabfence runtime, the files `make build` writes
// to dist/, the way browsers expect them: the module as application/wasm,
// precompressed (name.wasm.br, name.wasm.gz beside it) when the browser
// accepts it, with a strong ETag and a 304 for a copy the browser holds.
// A copy is served only when its sidecar (name.wasm.br.sha256, which make
// build writes) records the SHA-256 of the current file.
//
// For Go servers that serve the runtime themselves:
//
//	mux.Handle("GET /dist/", http.StripPrefix("/dist/", assets.New(os.DirFS("dist"))))
//
// Caching: a file is served with Cache-Control: no-cache (the browser
// revalidates it, a 304 of headers only, and never pairs a cached loader
// with a newer module), except under a content-hashed name: a query v=
// with the first 16 hex digits of the file's SHA-256, as the served loader
// names its modules, wasm_exec.js and tabfence.wasm (make build writes
// them in). Such a name is immutable: a repeat visit revalidates the loader
// alone. A v that does not match the file gets the file, no-cache.
package assets

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"unicode/utf8"
)

// Handler serves the files of a file system. It lists no directories: a
// path ending in "/" serves that directory's index.html.
type Handler struct {
	fsys fs.FS
	mu   sync.Mutex
	sums map[string]sum // by file name: the SHA-256 of its bytes
}

// sum is a file's SHA-256 (hex), valid while its stamp is unchanged.
type sum struct {
	stamp stamp
	hex   string
}

// New serves fsys (e.g. os.DirFS("dist")).
func New(fsys fs.FS) *Handler {
	return &Handler{fsys: fsys, sums: map[string]sum{}}
}

// ServeHTTP serves GET and HEAD for the file named by the request's path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name, ok := fileName(r.URL.Path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	rep, err := h.pick(name, r.Header.Values("Accept-Encoding"))
	if errors.Is(err, fs.ErrNotExist) {
		http.NotFound(w, r)
		return
	} else if err != nil {
		http.Error(w, "read error", http.StatusInternalServerError)
		return
	}
	defer rep.f.Close()
	// Whatever can fail is done before a header is set: an error answer
	// carries no Content-Encoding, ETag or immutable Cache-Control.
	etag, err := h.etag(rep)
	if err != nil {
		http.Error(w, "read error", http.StatusInternalServerError)
		return
	}
	rs, ok := rep.f.(io.ReadSeeker)
	if !ok {
		http.Error(w, "file is not seekable", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Add("Vary", "Accept-Encoding")
	hd.Set("Cache-Control", "no-cache")
	if v := r.URL.Query()["v"]; len(v) == 1 && len(v[0]) == versionLen && rep.sum[:versionLen] == v[0] {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	}
	if ct := contentType(name); ct != "" {
		hd.Set("Content-Type", ct)
	} else if rep.coding != "" {
		hd.Set("Content-Type", "application/octet-stream") // never sniff compressed bytes
	}
	if rep.coding != "" {
		hd.Set("Content-Encoding", rep.coding)
	}
	hd.Set("ETag", etag)
	http.ServeContent(w, r, name, rep.info.ModTime(), rs)
}

// fileName is the file a request path names, or false for a path no file
// can have (invalid UTF-8, "..", a NUL).
func fileName(p string) (string, bool) {
	if !utf8.ValidString(p) || strings.ContainsRune(p, 0) {
		return "", false
	}
	dir := p == "" || strings.HasSuffix(p, "/")
	name := strings.TrimPrefix(path.Clean("/"+p), "/")
	if dir {
		name = path.Join(name, "index.html")
	}
	if name == "" || !fs.ValidPath(name) {
		return "", false
	}
	return name, true
}

// representation is one file served for a name: the file itself or a
// precompressed copy of it.
type representation struct {
	file   string // the name of the file in the file system
	coding string // "br", "gzip", or "" for the file itself
	f      fs.File
	info   fs.FileInfo
	sum    string // the SHA-256 (hex) of the plain file, which this represents
}

// suffixes are the precompressed copies, by Content-Encoding.
var suffixes = map[string]string{"br": ".br", "gzip": ".gz"}

// sourceSuffix names the sidecar beside each copy (name.wasm.br.sha256):
// the SHA-256 of the file the copy was made from, as make build writes it.
const sourceSuffix = ".sha256"

// pick opens the best representation of name the browser accepts. A
// compressed copy is served only when its sidecar records the current
// file's hash: a copy from an earlier build, whatever its time after a cp
// or checkout, is passed over for the next coding or the file itself.
func (h *Handler) pick(name string, acceptEncoding []string) (representation, error) {
	orig, info, err := h.open(name)
	if err != nil {
		return representation{}, err
	}
	plain := representation{file: name, f: orig, info: info}
	if plain.sum, err = h.sum(plain); err != nil {
		orig.Close()
		return representation{}, err
	}
	for _, coding := range preferred(acceptEncoding) {
		if coding == "" {
			break
		}
		copyName := name + suffixes[coding]
		if !h.copyOf(copyName, plain.sum) {
			continue
		}
		f, cinfo, err := h.open(copyName)
		if err != nil {
			continue
		}
		orig.Close()
		return representation{file: copyName, coding: coding, f: f, info: cinfo, sum: plain.sum}, nil
	}
	return plain, nil
}

// maxSidecar bounds the sidecar read: 64 hex digits and a newline.
const maxSidecar = 128

// copyOf reports whether the sidecar of copyName records the hash sum.
func (h *Handler) copyOf(copyName, sum string) bool {
	f, _, err := h.open(copyName + sourceSuffix)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSidecar))
	return err == nil && strings.TrimSpace(string(b)) == sum
}

// open opens a regular file.
func (h *Handler) open(name string) (fs.File, fs.FileInfo, error) {
	f, err := h.fsys.Open(name)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, fs.ErrNotExist
	}
	return f, info, nil
}

// versionLen is the length of a content-hashed name's v: hex digits of
// the file's SHA-256.
const versionLen = 16

// etag is the strong ETag of the representation's bytes: the first half
// of their SHA-256.
func (h *Handler) etag(rep representation) (string, error) {
	if rep.coding == "" {
		return `"` + rep.sum[:32] + `"`, nil
	}
	s, err := h.sum(rep)
	if err != nil {
		return "", err
	}
	return `"` + s[:32] + `"`, nil
}

// sum is the SHA-256 (hex) of the representation's file, hashed again
// whenever its stamp changed. The file is left at its start.
func (h *Handler) sum(rep representation) (string, error) {
	st := stampOf(rep.info)
	h.mu.Lock()
	c, ok := h.sums[rep.file]
	h.mu.Unlock()
	if ok && c.stamp == st {
		return c.hex, nil
	}
	d := sha256.New()
	if _, err := io.Copy(d, rep.f); err != nil {
		return "", err
	}
	if s, ok := rep.f.(io.Seeker); ok {
		if _, err := s.Seek(0, io.SeekStart); err != nil {
			return "", err
		}
	}
	hx := hex.EncodeToString(d.Sum(nil))
	h.mu.Lock()
	h.sums[rep.file] = sum{stamp: st, hex: hx}
	h.mu.Unlock()
	return hx, nil
}

// contentType is the type of a file by its name: application/wasm, which
// WebAssembly.instantiateStreaming insists on, JavaScript for modules, and
// the system's table for the rest ("" when unknown).
func contentType(name string) string {
	switch ext := path.Ext(name); ext {
	case ".wasm":
		return "application/wasm"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".ts":
		return "text/plain; charset=utf-8" // a .d.ts, not an MPEG transport stream
	default:
		return mime.TypeByExtension(ext)
	}
}
