package connbench

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/e2e/harness"
	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/realtime"
	"github.com/tabfence/tabfence/receiver/sqlitestore"
)

// The bench's pages and its own realtime endpoint live under this prefix,
// in front of the demo server (server.StartLocal's middleware): one origin,
// so the pages load the runtime from /dist/ and their sockets pass the
// endpoint's same-origin check.
const prefix = "/bench-rt/"

var (
	//go:embed rtcodec.js
	rtcodecJS string
	//go:embed page.js
	pageJS string
)

const pageHTML = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>connection bench</title>` +
	`<script src="rtcodec.js"></script><script src="page.js"></script></head><body></body></html>`

// endpoint is receiver/realtime's Server as the bench hosts it: a SQLite
// store, an in-process feed the bench publishes to (the server-side clock of
// the fan-out figures is read just before Server.Publish), and a handler
// that records each mutation it applies, so the bench can count how often
// the server applied each id. The feed (the server's scope) of a socket is
// its URL's ?feed=, so each side and run has a stream of its own.
type endpoint struct {
	srv   *realtime.Server
	store receiver.Store
	dir   string
}

func newEndpoint(ctx context.Context) (*endpoint, error) {
	dir, err := os.MkdirTemp("", "tabfence-connbench-")
	if err != nil {
		return nil, err
	}
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "bench.db"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	e := &endpoint{store: store, dir: dir}
	if err := e.exec(ctx, `CREATE TABLE IF NOT EXISTS applied (id TEXT NOT NULL)`); err != nil {
		e.close()
		return nil, err
	}
	rc := receiver.New(store, receiver.Options{Scope: feedOf, Logger: quiet})
	e.srv = realtime.New(rc, realtime.NewMemFeed(0), e.apply, realtime.Options{Logger: quiet})
	return e, nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// feedOf is the endpoint's authentication: the scope is the socket's ?feed=.
func feedOf(r *http.Request) (string, error) {
	f := r.URL.Query().Get("feed")
	if f == "" {
		return "", errors.New("connbench: no feed")
	}
	return f, nil
}

func (e *endpoint) exec(ctx context.Context, q string, args ...any) error {
	tx, err := e.store.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, q, args...); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// issue is the demo tracker's record (the demo server's contract).
type issue struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Done  bool   `json:"done"`
	By    string `json:"by,omitempty"`
	At    int64  `json:"updatedAt,omitempty"`
}

type change struct {
	Store string `json:"store"`
	Key   string `json:"key"`
	Value issue  `json:"value"`
}

func changesOf(it issue) []byte {
	b, _ := json.Marshal([]change{{Store: "issues", Key: it.ID, Value: it}})
	return b
}

// apply is the endpoint's business handler: an issue.put is recorded in
// the receiver's transaction (so a second run for one id would be a second
// row) and published as the tracker's change list.
func (e *endpoint) apply(ctx context.Context, tx receiver.Tx, r *realtime.Request) (realtime.Result, error) {
	var it issue
	if r.Op != "issue.put" || json.Unmarshal(r.Payload, &it) != nil || it.ID == "" {
		return realtime.Result{Response: receiver.Response{Status: http.StatusBadRequest,
			Body: []byte(`{"type":"about:blank","title":"not an issue.put","status":400}`)}}, nil
	}
	if _, err := tx.Exec(ctx, `INSERT INTO applied (id) VALUES ($1)`, r.ID); err != nil {
		return realtime.Result{}, err
	}
	it.By, it.At = r.Scope, time.Now().UnixMilli()
	return realtime.Result{Response: receiver.Response{Status: http.StatusOK, Body: []byte(`{}`)}, Changes: changesOf(it)}, nil
}

// publish sends one delta to feed's sockets and returns when the server was
// asked to send it (ms, wall clock) and its version.
func (e *endpoint) publish(ctx context.Context, feed, key string) (sentAt float64, version uint64, err error) {
	b := changesOf(issue{ID: key, Title: "bench", By: "bench", At: time.Now().UnixMilli()})
	sentAt = harness.NowMs()
	d, err := e.srv.Publish(ctx, feed, b)
	return sentAt, d.Version, err
}

// appliedCounts returns how many times the server applied each mutation id
// that starts with idPrefix.
func (e *endpoint) appliedCounts(ctx context.Context, idPrefix string) (map[string]int, error) {
	out := map[string]int{}
	err := e.store.View(ctx, func(q receiver.Tx) error {
		rows, err := q.Query(ctx, `SELECT id, COUNT(*) FROM applied WHERE substr(id, 1, length($1)) = $1 GROUP BY id`, idPrefix)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var n int64
			if err := rows.Scan(&id, &n); err != nil {
				return err
			}
			out[id] = int(n)
		}
		return rows.Err()
	})
	return out, err
}

// mount serves the bench's page, its scripts and the endpoint (/bench-rt/ws)
// in front of next.
func (e *endpoint) mount(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		switch name {
		case "ws":
			e.srv.ServeHTTP(w, r)
		case "page.html":
			serveText(w, "text/html; charset=utf-8", pageHTML)
		case "rtcodec.js":
			serveText(w, "text/javascript; charset=utf-8", rtcodecJS)
		case "page.js":
			serveText(w, "text/javascript; charset=utf-8", pageJS)
		default:
			http.NotFound(w, r)
		}
	})
}

func serveText(w http.ResponseWriter, typ, body string) {
	w.Header().Set("Content-Type", typ)
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, body)
}

func (e *endpoint) close() {
	if e.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = e.srv.Shutdown(ctx)
		cancel()
	}
	_ = e.store.Close()
	os.RemoveAll(e.dir)
}

// demoStats reads the demo server's own endpoint (/realtime) through
// (*server.Local).RealtimeStats. Until the server has that method the
// assertion fails and the connection counts are taken on the bench's
// endpoint instead; once it has, this may call l.RealtimeStats() directly.
func demoStats(l *server.Local) (realtime.Stats, bool) {
	s, ok := any(l).(interface{ RealtimeStats() realtime.Stats })
	if !ok {
		return realtime.Stats{}, false
	}
	return s.RealtimeStats(), true
}
