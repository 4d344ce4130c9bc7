package server_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
)

func tusCall(t *testing.T, method, url, user string, h map[string]string, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Tus-Resumable", "1.0.0")
	if user != "" {
		req.Header.Set(server.DemoUserHeader, user)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// /files/ is the tus endpoint behind the demo's scope, with the size limit,
// its file store beside the SQLite database, and CORS exposing the tus
// headers to an allowed origin.
func TestUploadsMounted(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.New(server.Config{DB: filepath.Join(dir, "t.db"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Uploads: server.UploadConfig{MaxSize: 10}, AllowOrigins: []string{"https://app.example"}})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); _ = srv.Close() })
	data := "0123456789"
	h := sha256.Sum256([]byte(data))
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	create := map[string]string{"Upload-Length": "10", "Upload-Metadata": "key " + b64("k1") + ",sha256 " + b64(hex.EncodeToString(h[:])),
		"Origin": "https://app.example"}

	require.Equal(t, 401, tusCall(t, "POST", hs.URL+"/files/", "", create, "").StatusCode)
	c := tusCall(t, "POST", hs.URL+"/files/", "alice", create, "")
	require.Equal(t, 201, c.StatusCode)
	require.Contains(t, c.Header.Get("Access-Control-Expose-Headers"), "Upload-Offset")
	loc := c.Header.Get("Location")
	require.True(t, strings.HasPrefix(loc, hs.URL+"/files/"), loc)
	p := tusCall(t, "PATCH", loc, "alice", map[string]string{"Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"}, data)
	require.Equal(t, 204, p.StatusCode)
	id := strings.TrimPrefix(loc, hs.URL+"/files/")
	info, err := srv.Uploads().Complete(t.Context(), "alice", id)
	require.NoError(t, err)
	require.Equal(t, int64(10), info.Size)
	require.FileExists(t, filepath.Join(dir, "uploads", "data", id))
	require.Equal(t, 404, tusCall(t, "HEAD", loc, "bob", nil, "").StatusCode)
	// Downloads are off (the outbox never reads back), answered by tus.
	g := tusCall(t, "GET", loc, "alice", nil, "")
	require.Equal(t, 405, g.StatusCode)
	require.Equal(t, "1.0.0", g.Header.Get("Tus-Resumable"))

	create["Upload-Length"] = strconv.Itoa(11)
	create["Upload-Metadata"] = "key " + b64("k2") + ",sha256 " + b64(hex.EncodeToString(h[:]))
	require.Equal(t, 413, tusCall(t, "POST", hs.URL+"/files/", "alice", create, "").StatusCode)
}

// --upload-forwarded-headers: behind a proxy, Location names its origin.
func TestUploadsRespectForwardedHeaders(t *testing.T) {
	dir := t.TempDir()
	srv, err := server.New(server.Config{DB: filepath.Join(dir, "t.db"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Uploads: server.UploadConfig{RespectForwardedHeaders: true}})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); _ = srv.Close() })
	h := sha256.Sum256(nil)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	create := map[string]string{"Upload-Length": "0", "Upload-Metadata": "key " + b64("k1") + ",sha256 " + b64(hex.EncodeToString(h[:])),
		"X-Forwarded-Host": "app.example", "X-Forwarded-Proto": "https"}
	c := tusCall(t, "POST", hs.URL+"/files/", "alice", create, "")
	require.Equal(t, 201, c.StatusCode)
	require.True(t, strings.HasPrefix(c.Header.Get("Location"), "https://app.example/files/"), c.Header.Get("Location"))
}
