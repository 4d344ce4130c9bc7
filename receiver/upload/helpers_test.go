package upload_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/upload"
)

// tusServer is an upload.Server mounted at /files/ of an httptest server,
// authenticated by the X-User header.
type tusServer struct {
	*upload.Server
	http *httptest.Server
	dir  string
}

func newTus(t *testing.T, dir string, maxSize int64) *tusServer {
	t.Helper()
	return newTusWith(t, upload.Options{Dir: dir, MaxSize: maxSize})
}

func newTusWith(t *testing.T, o upload.Options) *tusServer {
	t.Helper()
	s, err := upload.New(upload.Options{
		Dir:                     o.Dir,
		MaxSize:                 o.MaxSize,
		NetworkTimeout:          o.NetworkTimeout,
		CreateWait:              o.CreateWait,
		RespectForwardedHeaders: o.RespectForwardedHeaders,
		Scope: func(r *http.Request) (string, error) {
			if u := r.Header.Get("X-User"); u != "" {
				return u, nil
			}
			return "", receiver.ErrUnauthenticated
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/files/", s.Handler())
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return &tusServer{Server: s, http: ts, dir: o.Dir}
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func metadata(pairs ...string) string {
	var els []string
	for i := 0; i < len(pairs); i += 2 {
		els = append(els, pairs[i]+" "+base64.StdEncoding.EncodeToString([]byte(pairs[i+1])))
	}
	return strings.Join(els, ",")
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (ts *tusServer) do(t *testing.T, method, path, user string, h map[string]string, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(method, ts.http.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	if body == nil {
		req.Body = http.NoBody
	}
	req.Header.Set("Tus-Resumable", "1.0.0")
	if user != "" {
		req.Header.Set("X-User", user)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := ts.http.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// create starts an upload of size bytes and returns the answer.
func (ts *tusServer) create(t *testing.T, user, key, hash string, size int) answer {
	t.Helper()
	return ts.do(t, "POST", "/files/", user, map[string]string{
		"Upload-Length":   strconv.Itoa(size),
		"Upload-Metadata": metadata("key", key, "sha256", hash, "filename", "photo.jpg"),
	}, nil)
}

func (ts *tusServer) patch(t *testing.T, path, user string, offset int, chunk []byte) answer {
	t.Helper()
	return ts.do(t, "PATCH", path, user, map[string]string{
		"Upload-Offset": strconv.Itoa(offset),
		"Content-Type":  "application/offset+octet-stream",
	}, chunk)
}

// pathOf is the path of a Location, which names the host it was answered on.
func pathOf(t *testing.T, loc string) string {
	t.Helper()
	u, err := url.Parse(loc)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(u.Path, "/files/"), loc)
	return u.Path
}

func idOf(t *testing.T, loc string) string {
	return strings.TrimPrefix(pathOf(t, loc), "/files/")
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// stored is what the data file of the upload at loc holds: downloads are
// off, so the bytes are read where tusd keeps them.
func (ts *tusServer) stored(t *testing.T, loc string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ts.dir, "data", idOf(t, loc)))
	require.NoError(t, err)
	return string(b)
}
