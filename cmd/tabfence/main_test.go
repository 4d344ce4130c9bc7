package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHelp(t *testing.T) {
	var out, errb bytes.Buffer
	require.Equal(t, 0, run([]string{"--help"}, &out, &errb), "exit")
	for _, want := range []string{"tabfence serve", "-addr", "-db", "-dist", "-body-timeout", "-max-body-memory", "X-Demo-User", "Idempotency-Key"} {
		assert.Contains(t, out.String(), want, "help lacks")
	}
	var serveHelp bytes.Buffer
	require.Equal(t, 0, run([]string{"serve", "--help"}, &out, &serveHelp), "serve --help: exit")
	// serve --help lists every flag and every endpoint.
	var flags []string
	serveFlags(io.Discard, &serveConfig{}).VisitAll(func(f *flag.Flag) { flags = append(flags, "-"+f.Name) })
	for _, want := range append(flags, "/dist/", "POST /api/notes", "GET  /api/notes", "/api/effects", "/fence/", "/healthz", "GET  /realtime", "/realtime/snapshot", "/api/signout") {
		assert.Contains(t, serveHelp.String(), want, "serve --help lacks")
	}
	require.Equal(t, 2, run([]string{"bogus"}, &out, &errb), "bogus command: exit")
	require.Equal(t, 2, run([]string{"serve", "--log-level", "loud"}, &out, &errb), "bad log level: exit")
}

func TestServeShutsDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cfg := serveConfig{addr: "127.0.0.1:0", db: filepath.Join(t.TempDir(), "t.db"), dist: t.TempDir()}
	done := make(chan error, 1)
	go func() { done <- listenAndServe(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	time.Sleep(200 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("no graceful shutdown")
	}
}
