package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
)

// tabfence serve sends the brotli copy `make build` writes to a browser that
// accepts it, and a 304 to one that already holds it.
func TestServesTheModuleCompressed(t *testing.T) {
	dist := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dist, "tabfence.wasm"), []byte("\x00asm raw"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dist, "tabfence.wasm.br"), []byte("br!"), 0o644))
	sum := sha256.Sum256([]byte("\x00asm raw")) // the source make build records beside the copy
	require.NoError(t, os.WriteFile(filepath.Join(dist, "tabfence.wasm.br.sha256"), []byte(hex.EncodeToString(sum[:])+"\n"), 0o644))
	l, err := server.StartLocal(dist, nil)
	require.NoError(t, err)
	t.Cleanup(l.Close)

	req, _ := http.NewRequest("GET", l.URL+"/dist/tabfence.wasm", nil)
	req.Header.Set("Accept-Encoding", "br, gzip")
	resp, err := http.DefaultTransport.RoundTrip(req) // no transparent gzip handling
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "br", resp.Header.Get("Content-Encoding"))
	assert.Equal(t, "application/wasm", resp.Header.Get("Content-Type"))
	assert.Equal(t, "3", resp.Header.Get("Content-Length"))
	assert.Equal(t, "br!", string(b))

	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	resp, err = http.DefaultTransport.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
}
