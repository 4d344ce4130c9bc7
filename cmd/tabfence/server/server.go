// Package server is the HTTP server `tabfence serve` runs: the runtime files
// from dist/, the demo pages, a demo mutation API behind the receiver, the
// demo's realtime endpoint (an issue tracker) at /realtime, and resumable
// uploads (tus, receiver/upload) at /files/.
//
// It is importable so end-to-end tests can mount the same handler in-process
// (httptest.NewServer(srv)) and wrap it with their own routes or faults
// through Config.Middleware.
package server

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/tabfence/tabfence/assets"
	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/pgstore"
	"github.com/tabfence/tabfence/receiver/realtime"
	"github.com/tabfence/tabfence/receiver/realtime/pgfeed"
	"github.com/tabfence/tabfence/receiver/sqlitestore"
	"github.com/tabfence/tabfence/receiver/upload"
)

//go:embed demo
var demoFS embed.FS

// DefaultDB is the database used when Config.DB is empty.
const DefaultDB = "tabfence-data/tabfence.db"

// DemoUserHeader names the demo's caller. DEMO ONLY: the demo has no
// accounts, so any client can claim any user. A real server derives the
// scope from its own authentication (a session cookie, a verified token).
const DemoUserHeader = "X-Demo-User"

// DemoUserCookie names the demo's caller when DemoUserHeader is absent: the
// credentials of a page that logs in with a cookie, which every tab of the
// browser sends, whichever tab's user it was set for (the demo page's
// auth=cookie mode). DEMO ONLY, like the header: the page sets it itself.
const DemoUserCookie = "tabfence_demo_user"

// Config configures a Server. Zero values mean defaults.
type Config struct {
	// DB is a SQLite file path or a postgres:// (postgresql://) URL.
	DB string
	// Dist is the directory served at /dist/ (the built runtime); empty
	// means /dist/ is not served.
	Dist string
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
	// Middleware, when set, wraps the whole handler. Tests use it to add
	// routes, latency or injected failures in front of the real server.
	Middleware func(http.Handler) http.Handler
	// Receiver overrides receiver options (Retention, MaxBody, ClaimTTL,
	// Clock, BodyTimeout, MaxBodyMemory). Scope, Logger and
	// RejectInvalidUTF8 are always set by the server.
	Receiver receiver.Options
	// ReapInterval is how often expired idempotency records are deleted
	// (default 10 minutes).
	ReapInterval time.Duration
	// AllowOrigins lists the origins (scheme://host[:port], or "*") whose
	// pages may call the API and /fence/ and load /dist/ (CORS, preflights
	// answered). Empty: same origin only.
	AllowOrigins []string
	// Realtime overrides the realtime endpoint's options (timeouts,
	// buffers); Logger is set by the server, and the allowed origins are
	// added to its Accept.OriginPatterns.
	Realtime realtime.Options
	// Uploads configures the resumable uploads (tus) at /files/.
	Uploads UploadConfig
}

// feed is the realtime endpoint's change stream: a realtime.StoreFeed on
// SQLite, pgfeed's on PostgreSQL (several instances fan out each other's
// changes).
type feed interface {
	realtime.TxFeed
	Head(ctx context.Context, q receiver.Tx, scope string) (uint64, error)
	Close() error
}

// Server is the tabfence HTTP server. It implements http.Handler.
type Server struct {
	store   receiver.Store
	rc      *receiver.Receiver
	feed    feed
	rt      *realtime.Server
	up      *upload.Server
	handler http.Handler
	log     *slog.Logger
	stop    context.CancelFunc
}

// New opens the database, creates the demo tables and builds the handler.
// Call Close when done.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DB == "" {
		cfg.DB = DefaultDB
	}
	withCORS, err := newCORS(cfg.AllowOrigins)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := OpenStore(ctx, cfg.DB)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, store); err != nil {
		_ = store.Close()
		return nil, err
	}
	ropts := cfg.Receiver
	ropts.Scope = demoScope
	ropts.Logger = cfg.Logger
	ropts.RejectInvalidUTF8 = true // a JSON API: see DecodeNote
	s := &Server{store: store, rc: receiver.New(store, ropts), log: cfg.Logger}
	if s.feed, err = openFeed(ctx, store, cfg.DB, cfg.Logger); err != nil {
		_ = store.Close()
		return nil, err
	}
	s.rt = realtime.New(s.rc, s.feed, s.applyIssue, realtimeOptions(cfg))
	if s.up, err = newUploads(cfg); err != nil {
		_ = s.feed.Close()
		_ = store.Close()
		return nil, err
	}
	bodyTimeout := ropts.BodyTimeout
	if bodyTimeout <= 0 {
		bodyTimeout = receiver.DefaultBodyTimeout
	}
	var h http.Handler = readDeadline(withCORS(s.routes(cfg.Dist)), bodyTimeout)
	if cfg.Middleware != nil {
		h = cfg.Middleware(h)
	}
	s.handler = h
	rctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	s.rc.StartReaper(rctx, cfg.ReapInterval)
	return s, nil
}

func isPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// openFeed opens the change stream of the realtime endpoint on store.
func openFeed(ctx context.Context, store receiver.Store, db string, log *slog.Logger) (feed, error) {
	if isPostgres(db) {
		f, err := pgfeed.Open(ctx, store, db, pgfeed.Options{Logger: log})
		if err != nil {
			return nil, fmt.Errorf("server: open change feed: %w", err)
		}
		return f, nil
	}
	f, err := realtime.OpenStoreFeed(ctx, store, realtime.StoreOptions{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("server: open change feed: %w", err)
	}
	return f, nil
}

// realtimeOptions are cfg.Realtime with the server's logger, and the
// allowed origins' hosts accepted for the upgrade (same host always is).
func realtimeOptions(cfg Config) realtime.Options {
	o := cfg.Realtime
	o.Logger = cfg.Logger
	if len(cfg.AllowOrigins) == 0 {
		return o
	}
	acc := websocket.AcceptOptions{}
	if o.Accept != nil {
		acc = *o.Accept
	}
	for _, origin := range cfg.AllowOrigins {
		acc.OriginPatterns = append(acc.OriginPatterns, origin) // "*", or scheme://host[:port]
	}
	o.Accept = &acc
	return o
}

// OpenStore opens the store named by db: a postgres:// or postgresql:// URL,
// otherwise a SQLite file path.
func OpenStore(ctx context.Context, db string) (receiver.Store, error) {
	if isPostgres(db) {
		st, err := pgstore.Open(ctx, db, 0)
		if err != nil {
			return nil, fmt.Errorf("server: open postgres: %w", err)
		}
		return st, nil
	}
	st, err := sqlitestore.Open(ctx, filepath.Clean(db))
	if err != nil {
		return nil, fmt.Errorf("server: open sqlite %s: %w", db, err)
	}
	return st, nil
}

// ServeHTTP serves the demo, the runtime and the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Handler returns the server's http.Handler (the Server itself).
func (s *Server) Handler() http.Handler { return s }

// Receiver returns the receiver guarding the demo API, e.g. for Reap.
func (s *Server) Receiver() *receiver.Receiver { return s.rc }

// Realtime returns the realtime endpoint mounted at /realtime (its Stats,
// or Publish for changes made outside a mutation).
func (s *Server) Realtime() *realtime.Server { return s.rt }

// Shutdown closes the realtime connections with 1001 (going away) and
// waits for them until ctx ends; http.Server.Shutdown does not wait for
// hijacked connections, so call this first.
func (s *Server) Shutdown(ctx context.Context) error { return s.rt.Shutdown(ctx) }

// Close closes the realtime connections (within 5 s), stops the reapers
// and closes the database.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.rt.Shutdown(ctx)
	s.stop()
	return errors.Join(s.feed.Close(), s.store.Close())
}

// ErrNoDemoUser is returned by the demo scope when neither X-Demo-User nor
// the demo's cookie names a user.
var ErrNoDemoUser = errors.New("server: " + DemoUserHeader + " header missing or malformed")

func demoScope(r *http.Request) (string, error) {
	u := r.Header.Get(DemoUserHeader)
	if _, sent := r.Header[DemoUserHeader]; !sent {
		if c, err := r.Cookie(DemoUserCookie); err == nil {
			u = c.Value
		}
	}
	if !validUser(u) {
		return "", ErrNoDemoUser
	}
	return u, nil
}

// validUser accepts 1..64 printable ASCII characters.
func validUser(u string) bool {
	if len(u) == 0 || len(u) > 64 {
		return false
	}
	for i := 0; i < len(u); i++ {
		if u[i] < 0x21 || u[i] > 0x7e {
			return false
		}
	}
	return true
}

func (s *Server) routes(dist string) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /api/notes", s.rc.Handle(putNote))
	mux.Handle("POST /api/notes/batch", s.rc.HandleBatch(putNote))
	mux.HandleFunc("GET /api/notes", s.listNotes)
	mux.HandleFunc("GET /api/effects", s.effects)
	mux.Handle("GET /realtime", s.rt)
	mux.HandleFunc("GET /realtime/snapshot", s.snapshot)
	mux.HandleFunc("POST /api/signout", s.signOut)
	mux.Handle("POST /fence/{resource...}", s.rc.FenceHandler())
	s.mountUploads(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	if dist != "" {
		// The runtime and the demo: precompressed copies, ETags, no-cache
		// (the runtime changes on every build and must never be served stale).
		mux.Handle("GET /dist/", http.StripPrefix("/dist/", assets.New(os.DirFS(dist))))
	}
	sub, _ := fs.Sub(demoFS, "demo")
	mux.Handle("GET /", assets.New(sub))
	return s.logRequests(mux)
}

// readDeadline bounds the reading of every request that has a body, routes
// outside the receiver included: net/http discards up to 256 KiB of a body a
// handler leaves unread, and without a deadline a client trickling that body
// holds the connection for as long as it likes. The receiver re-arms the
// deadline for its own routes and lifts it once it has the body. A request
// without a body gets none: there is nothing to bound, and an armed deadline
// would fire in net/http's read of the idle connection and cancel
// r.Context() under a slow query. (A body the handler leaves unread delays
// that read until after the handler.)
func readDeadline(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
			"dur_ms", float64(time.Since(start).Microseconds())/1000)
	})
}
