package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/tabfence/tabfence/receiver/realtime"
)

// Local is a Server on a loopback port with a throwaway SQLite database:
// what the end-to-end tests and the bench run in-process. 127.0.0.1 over
// http is a secure context, which Web Locks require.
type Local struct {
	URL string
	ts  *httptest.Server
	srv *Server
	dir string
}

// StartLocal serves the runtime built in dist (Config.Dist) with mw, when
// set, in front of the real server (Config.Middleware): tests add routes,
// latency or failures with it.
func StartLocal(dist string, mw func(http.Handler) http.Handler) (*Local, error) {
	dir, err := os.MkdirTemp("", "tabfence-local-")
	if err != nil {
		return nil, err
	}
	srv, err := New(Config{
		DB:         filepath.Join(dir, "local.db"),
		Dist:       dist,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Middleware: mw,
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ts := httptest.NewServer(srv)
	return &Local{URL: ts.URL, ts: ts, srv: srv, dir: dir}, nil
}

// RealtimeStats returns the /realtime endpoint's connection counters.
func (l *Local) RealtimeStats() realtime.Stats { return l.srv.rt.Stats() }

// ReapChanges deletes the change feed's rows but the last keep of each
// user (SQLite's feed): a client behind them is reset at its next ready.
func (l *Local) ReapChanges(ctx context.Context, keep int) (int64, error) {
	f, ok := l.srv.feed.(interface {
		ReapKeeping(ctx context.Context, keep int) (int64, error)
	})
	if !ok {
		return 0, errors.New("server: the change feed cannot reap")
	}
	return f.ReapKeeping(ctx, keep)
}

// Server returns the server behind l (its Realtime endpoint, its Receiver).
func (l *Local) Server() *Server { return l.srv }

// Close stops the server and removes its database.
func (l *Local) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = l.srv.Shutdown(ctx)
	l.ts.Close()
	_ = l.srv.Close()
	os.RemoveAll(l.dir)
}
