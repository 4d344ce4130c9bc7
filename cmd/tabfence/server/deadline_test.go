package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
)

// slowStore is a store whose every read starts delay late, as a loaded
// database does; a canceled context ends the wait.
type slowStore struct {
	receiver.Store
	delay time.Duration
}

func (s slowStore) View(ctx context.Context, fn func(q receiver.Tx) error) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(s.delay):
	}
	return s.Store.View(ctx, fn)
}

// The demo's reads slower than BodyTimeout still succeed: the read deadline
// bounds bodies only, and must not cancel a query's context.
func TestSlowQueryOutlastsBodyTimeout(t *testing.T) {
	const bodyTimeout = 200 * time.Millisecond
	srv, err := New(Config{DB: filepath.Join(t.TempDir(), "s.db"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Receiver: receiver.Options{BodyTimeout: bodyTimeout}})
	require.NoError(t, err)
	srv.store = slowStore{srv.store, 3 * bodyTimeout}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); _ = srv.Close() })
	for _, c := range []struct{ path, body string }{
		{"/api/notes", ""}, {"/api/effects", ""}, {"/api/notes", "{}"},
	} {
		req, _ := http.NewRequest("GET", hs.URL+c.path, strings.NewReader(c.body))
		req.Header.Set(DemoUserHeader, "ann")
		start := time.Now()
		resp, err := hs.Client().Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s with body %q after %s: %d %s, want 200", c.path, c.body, time.Since(start), resp.StatusCode, b)
		d := time.Since(start)
		require.GreaterOrEqual(t, d, 3*bodyTimeout, "GET %s: answered after %s, before the store's delay", c.path, d)
	}
}
