// Command tabfence runs the tabfence server: the browser runtime from dist/,
// the demo pages, and a demo API whose mutations go through the idempotent,
// fenced receiver.
//
//	tabfence serve --addr 127.0.0.1:8080 --db tabfence-data/tabfence.db --dist dist
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/receiver"
)

const usage = `tabfence: exactly-once browser mutations across tabs.

Usage:
  tabfence serve [flags]    run the server (demo, runtime files and demo API)
  tabfence help             show this help

Quick start (from the repository root):
  make build                # builds dist/tabfence.wasm and its loader
  tabfence serve            # then open http://127.0.0.1:8080/ in two tabs
  (or simply: make demo)

What "serve" serves:
  /                  the demo pages
  /dist/             the runtime (tabfence.wasm, wasm_exec.js, tabfence.js and its modules)
  POST /api/notes    {"id":"...","text":"..."}: upserts a note; requires the
                     Idempotency-Key header, so a retry never applies twice
  GET  /api/notes    the caller's notes
  GET  /api/effects  {"effects": N}: how many mutations took effect
  GET  /realtime     the demo tracker's realtime connection (WebSocket):
                     mutations issue.put {"id","title","done"} and
                     issue.delete {"id"}, deltas of the store "issues"
  GET  /realtime/snapshot
                     {"version":N,"changes":[...]}: every issue, for a
                     client told to reset
  POST /api/signout  ends the caller's realtime connections (4401) and
                     clears the demo cookie
  POST /fence/{res}  {"resource":"...","token":N}: the next fencing token
  /files/            resumable uploads (tus 1.0: POST, HEAD, PATCH, GET,
                     DELETE), each bound to its user and idempotency key
                     (docs/uploads.md)
  GET  /healthz      "ok": the server is up (for a load balancer or a probe)
  The demo has no accounts: every API call names its user in the
  X-Demo-User header or the tabfence_demo_user cookie (demo only; without
  it the answer is 401).
  The protocol (status codes, headers, retention) is in receiver/README.md;
  flags and endpoints are also in docs/server.md.

Serve flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		serveFlags(stderr, &serveConfig{}).PrintDefaults()
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		serveFlags(stdout, &serveConfig{}).PrintDefaults()
		return 0
	default:
		fmt.Fprintf(stderr, "tabfence: unknown command %q\n\n", args[0])
		fmt.Fprint(stderr, usage)
		serveFlags(stderr, &serveConfig{}).PrintDefaults()
		return 2
	}
}

type serveConfig struct {
	addr, db, dist, logLevel, logFormat string
	retention, bodyTimeout              time.Duration
	maxBody, maxBodyMemory              int64
	allowOrigins                        []string
	uploadDir                           string
	maxUpload                           int64
	uploadForwarded                     bool
}

func serveFlags(out io.Writer, cfg *serveConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.addr, "addr", "127.0.0.1:8080", "listen address (host:port); keep it on loopback unless you mean to expose the demo")
	fs.StringVar(&cfg.db, "db", server.DefaultDB, "SQLite file path, or a postgres://user@host:port/db?sslmode=disable URL for several instances")
	fs.StringVar(&cfg.dist, "dist", "dist", "directory with the built runtime, served at /dist/ (make build fills it)")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "log level: debug (one line per request), info, warn, error")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log format: text or json")
	fs.DurationVar(&cfg.retention, "retention", receiver.DefaultRetention, "how long answers are kept for replay; a retry after that runs again")
	fs.Int64Var(&cfg.maxBody, "max-body", receiver.DefaultMaxBody, "largest accepted request body in bytes (larger: 413)")
	fs.DurationVar(&cfg.bodyTimeout, "body-timeout", receiver.DefaultBodyTimeout, "time a client has to send a request's body (slower: 408, connection closed)")
	fs.Int64Var(&cfg.maxBodyMemory, "max-body-memory", receiver.DefaultMaxBodyMemory, "bytes of request bodies held at once, all requests together (past it: 503 + Retry-After)")
	fs.StringVar(&cfg.uploadDir, "upload-dir", "", "directory of the resumable uploads at /files/ (default: uploads/ beside a SQLite --db; with PostgreSQL, /files/ is off unless set, and then for one instance only)")
	fs.BoolVar(&cfg.uploadForwarded, "upload-forwarded-headers", false, "build upload URLs (Location) from X-Forwarded-Host/-Proto and Forwarded: only behind a proxy that sets them")
	fs.Int64Var(&cfg.maxUpload, "max-upload", server.DefaultMaxUpload, "largest resumable upload in bytes (a larger Upload-Length: 413)")
	fs.Func("allow-origin", "an origin (https://app.example, or *) whose pages may call the API and /fence/ and load /dist/ (CORS); repeat or comma-separate for several", func(v string) error {
		for _, o := range strings.Split(v, ",") {
			if o = strings.TrimSpace(o); o != "" {
				cfg.allowOrigins = append(cfg.allowOrigins, o)
			}
		}
		return nil
	})
	fs.Usage = func() {
		fmt.Fprint(out, usage)
		fs.PrintDefaults()
	}
	return fs
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("bad --log-level %q", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("bad --log-format %q (text or json)", format)
}

func serve(args []string, stdout, stderr io.Writer) int {
	var cfg serveConfig
	fs := serveFlags(stderr, &cfg)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tabfence serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	log, err := newLogger(stderr, cfg.logLevel, cfg.logFormat)
	if err != nil {
		fmt.Fprintln(stderr, "tabfence serve:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := listenAndServe(ctx, cfg, log); err != nil {
		log.Error("serve", "err", err)
		return 1
	}
	return 0
}

func listenAndServe(ctx context.Context, cfg serveConfig, log *slog.Logger) error {
	if st, err := os.Stat(cfg.dist); err != nil || !st.IsDir() {
		log.Warn("runtime directory missing; /dist/ will answer 404 (run `make build`)", "dist", cfg.dist)
	}
	srv, err := server.New(server.Config{
		DB:     cfg.db,
		Dist:   cfg.dist,
		Logger: log,
		Receiver: receiver.Options{Retention: cfg.retention, MaxBody: cfg.maxBody,
			BodyTimeout: cfg.bodyTimeout, MaxBodyMemory: cfg.maxBodyMemory},
		AllowOrigins: cfg.allowOrigins,
		Uploads: server.UploadConfig{Dir: cfg.uploadDir, MaxSize: cfg.maxUpload,
			RespectForwardedHeaders: cfg.uploadForwarded},
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	db := cfg.db
	if i := strings.Index(db, "@"); i >= 0 && strings.Contains(db, "://") {
		db = db[:strings.Index(db, "://")+3] + "***" + db[i:] // never log credentials
	}
	log.Info("tabfence serving", "url", "http://"+ln.Addr().String()+"/", "db", db, "dist", cfg.dist)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing in-flight requests (10s at most)")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The realtime sockets first: http.Server.Shutdown does not wait for
	// hijacked connections.
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("realtime connections still open at shutdown", "err", err)
	}
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}
