package harness

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
)

// Server is the tabfence server (cmd/tabfence/server: the demo at /, the
// runtime at /dist/) on a local port, with a throwaway SQLite database.
type Server struct {
	URL string
	ts  *httptest.Server
	srv *server.Server
	dir string
}

// Serve starts the server for the built runtime in distDir. It fails with
// a clear message when the runtime was not built.
func Serve(distDir string) (*Server, error) { return ServeWith(distDir, nil) }

// ServeWith is Serve with mw in front of the real server (server.Config's
// Middleware): tests add routes, latency or failures with it.
func ServeWith(distDir string, mw func(http.Handler) http.Handler) (*Server, error) {
	if err := CheckDist(distDir); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tabfence-e2e-")
	if err != nil {
		return nil, err
	}
	srv, err := server.New(server.Config{
		DB:         filepath.Join(dir, "e2e.db"),
		Dist:       distDir,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Middleware: mw,
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// 127.0.0.1 over http is a secure context, which Web Locks require.
	ts := httptest.NewServer(srv)
	return &Server{URL: ts.URL, ts: ts, srv: srv, dir: dir}, nil
}

// Close stops the server and removes its database.
func (s *Server) Close() {
	s.ts.Close()
	_ = s.srv.Close()
	os.RemoveAll(s.dir)
}

// CheckDist reports whether distDir holds a built runtime.
func CheckDist(distDir string) error {
	for _, f := range []string{"tabfence.wasm", "wasm_exec.js", "tabfence.js"} {
		if _, err := os.Stat(filepath.Join(distDir, f)); err != nil {
			return errors.New("harness: " + filepath.Join(distDir, f) + " is missing: run `make build` first")
		}
	}
	return nil
}
