package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"tabfence serve", "-addr", "-db", "-dist", "-body-timeout", "-max-body-memory", "X-Demo-User", "Idempotency-Key"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if code := run([]string{"serve", "--help"}, &out, &errb); code != 0 {
		t.Fatalf("serve --help: exit %d", code)
	}
	if code := run([]string{"bogus"}, &out, &errb); code != 2 {
		t.Fatalf("bogus command: exit %d", code)
	}
	if code := run([]string{"serve", "--log-level", "loud"}, &out, &errb); code != 2 {
		t.Fatalf("bad log level: exit %d", code)
	}
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
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no graceful shutdown")
	}
}
