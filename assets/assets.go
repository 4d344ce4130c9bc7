// Package assets serves the tabfence runtime, the files `make build` writes
// to dist/, the way browsers expect them: the module as application/wasm,
// precompressed (name.wasm.br, name.wasm.gz beside it) when the browser
// accepts it, with a strong ETag and a 304 for a copy the browser holds.
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
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Handler serves the files of a file system. It lists no directories: a
// path ending in "/" serves that directory's index.html.
type Handler struct {
	fsys fs.FS
	mu   sync.Mutex
	tags map[string]tag // by file name: the ETag of its bytes
}

// tag is a file's ETag, valid while its size and time are unchanged.
type tag struct {
	size int64
	mod  time.Time
	etag string
}

// New serves fsys (e.g. os.DirFS("dist")).
func New(fsys fs.FS) *Handler {
	return &Handler{fsys: fsys, tags: map[string]tag{}}
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
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer rep.f.Close()
	hd := w.Header()
	hd.Add("Vary", "Accept-Encoding")
	hd.Set("Cache-Control", "no-cache")
	if v := r.URL.Query()["v"]; len(v) == 1 && len(v[0]) == versionLen {
		if h.versioned(name, v[0]) {
			hd.Set("Cache-Control", "public, max-age=31536000, immutable")
		}
	}
	if ct := contentType(name); ct != "" {
		hd.Set("Content-Type", ct)
	} else if rep.coding != "" {
		hd.Set("Content-Type", "application/octet-stream") // never sniff compressed bytes
	}
	if rep.coding != "" {
		hd.Set("Content-Encoding", rep.coding)
	}
	etag, err := h.etag(rep)
	if err != nil {
		http.Error(w, "read error", http.StatusInternalServerError)
		return
	}
	hd.Set("ETag", etag)
	rs, ok := rep.f.(io.ReadSeeker)
	if !ok {
		http.Error(w, "file is not seekable", http.StatusInternalServerError)
		return
	}
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
}

// suffixes are the precompressed copies, by Content-Encoding.
var suffixes = map[string]string{"br": ".br", "gzip": ".gz"}

// pick opens the best representation of name the browser accepts: a
// compressed copy only when it is at least as new as the file, so a copy
// left from an older build is never served for a newer module.
func (h *Handler) pick(name string, acceptEncoding []string) (representation, error) {
	orig, info, err := h.open(name)
	if err != nil {
		return representation{}, err
	}
	for _, coding := range preferred(acceptEncoding) {
		if coding == "" {
			break
		}
		f, cinfo, err := h.open(name + suffixes[coding])
		if err != nil {
			continue
		}
		if cinfo.ModTime().Before(info.ModTime()) {
			f.Close()
			continue
		}
		orig.Close()
		return representation{file: name + suffixes[coding], coding: coding, f: f, info: cinfo}, nil
	}
	return representation{file: name, f: orig, info: info}, nil
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

// versioned reports whether v names the current content of file name.
func (h *Handler) versioned(name, v string) bool {
	f, info, err := h.open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	etag, err := h.etag(representation{file: name, f: f, info: info})
	return err == nil && len(etag) > versionLen && etag[1:1+versionLen] == v
}

// etag is the strong ETag of the representation's bytes, computed once per
// version of the file. The file is left at its start.
func (h *Handler) etag(rep representation) (string, error) {
	h.mu.Lock()
	t, ok := h.tags[rep.file]
	h.mu.Unlock()
	if ok && t.size == rep.info.Size() && t.mod.Equal(rep.info.ModTime()) {
		return t.etag, nil
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, rep.f); err != nil {
		return "", err
	}
	if s, ok := rep.f.(io.Seeker); ok {
		if _, err := s.Seek(0, io.SeekStart); err != nil {
			return "", err
		}
	}
	etag := `"` + hex.EncodeToString(sum.Sum(nil)[:16]) + `"`
	h.mu.Lock()
	h.tags[rep.file] = tag{size: rep.info.Size(), mod: rep.info.ModTime(), etag: etag}
	h.mu.Unlock()
	return etag, nil
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
