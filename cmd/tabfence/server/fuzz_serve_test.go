package server_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/wire"
)

// FuzzServe sends hostile requests through the whole server (receiver,
// decoding, SQLite): it must never panic or answer 5xx, and the receiver's
// rejections must be problem+json.
func FuzzServe(f *testing.F) {
	f.Add("POST", "/api/notes", "ann", "k1", "", "", []byte(`{"id":"a","text":"b"}`))
	f.Add("POST", "/api/notes", "ann", `"k1"`, "doc:1", "1", []byte(`{"id":"a","text":"b"}`))
	f.Add("POST", "/api/notes", "", "k", "", "", []byte(`{}`))
	f.Add("POST", "/fence/doc:1", "ann", "", "", "", []byte(nil))
	f.Add("POST", "/fence/a b", "ann", "", "", "", []byte(nil))
	f.Add("PUT", "/api/notes", "ann", "\x00", "r", "0", []byte("\xff"))
	f.Add("GET", "/api/notes", "ann", "", "", "", []byte(nil))
	f.Add("GET", "/dist/../../etc/passwd", "", "", "", "", []byte(nil))
	srv, err := server.New(server.Config{
		DB: filepath.Join(f.TempDir(), "fuzz.db"), Dist: f.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(f, err)
	f.Cleanup(func() { _ = srv.Close() })
	f.Fuzz(func(t *testing.T, method, path, user, key, res, tok string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(method, "http://x"+path, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		for k, v := range map[string]string{server.DemoUserHeader: user, wire.HeaderIdempotencyKey: key,
			wire.HeaderResource: res, wire.HeaderFencingToken: tok} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		require.Less(t, w.Code, 500, "%s %s: %d %s", method, path, w.Code, w.Body)
		ct := w.Header().Get("Content-Type")
		if req.Method == "POST" && req.URL.Path == "/api/notes" && w.Code >= 400 && ct != wire.ContentTypeProblem {
			t.Fatalf("rejection %d with Content-Type %q", w.Code, ct)
		}
	})
}
