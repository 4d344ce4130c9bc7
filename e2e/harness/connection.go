package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// The realtime connection (tf.connection) across tabs: a test page that
// loads the runtime and drives one connection through window.RT (ConnJS),
// typed readers of what the page recorded, a tap on the server's
// /realtime route that sees every upgrade and can cut the live sockets,
// and the demo server's snapshot.

// ConnPagePath is the test page ConnPage serves. With ?faults=1 the page
// can drop the BroadcastChannel messages it receives (RT.mute).
const ConnPagePath = "/test/connection.html"

// ConnJS is the page's module: it loads the runtime (RT.loaded) and
// installs window.RT, whose open(options) joins tf.connection (the demo's
// /realtime, the replica store "issues", a short backoff) as the demo
// user options.user (the demo's cookie, which the WebSocket upgrade
// carries) and records every delta, reload, status and pending list with
// its page time; mutate(key, title) starts an issue.put and records how
// it settles in RT.results[key].
const ConnJS = `
import { load } from "/dist/tabfence.js";
const now = () => performance.timeOrigin + performance.now();
const RT = window.RT = { tf: null, conn: null, loaded: false, error: null, muted: null, dropped: 0,
	deltas: [], reloads: [], statuses: [], pendings: [], results: {} };
if (new URLSearchParams(location.search).get("faults") === "1") {
	// A real BroadcastChannel; RT.mute(name) makes this page miss what
	// arrives on that channel, as a page misses what was announced while
	// it could not listen.
	const Real = globalThis.BroadcastChannel;
	globalThis.BroadcastChannel = class extends Real {
		set onmessage(fn) {
			super.onmessage = typeof fn !== "function" ? fn : (ev) => {
				if (RT.muted === this.name) { RT.dropped++; return; }
				return fn.call(this, ev);
			};
		}
		get onmessage() { return super.onmessage; }
	};
}
RT.setUser = (user) => {
	document.cookie = user ? "tabfence_demo_user=" + user + "; path=/; SameSite=Strict"
		: "tabfence_demo_user=; path=/; SameSite=Strict; max-age=0";
	return true;
};
RT.open = async (o) => {
	if (o.user) RT.setUser(o.user);
	const conn = RT.conn = await RT.tf.connection({ url: "/realtime", replica: { stores: ["issues"] },
		backoff: { base: 100, cap: 2000 }, ...o });
	conn.onDelta((d) => RT.deltas.push({ at: now(), version: d.version, keys: d.changes.map((c) => c.key) }));
	conn.onReload((v) => RT.reloads.push({ at: now(), version: v }));
	conn.onStatus((s) => RT.statuses.push({ at: now(), ...s }));
	conn.onPending((p) => RT.pendings.push({ at: now(), ids: p.map((m) => m.id) }));
	return { lockName: conn.lockName, database: conn.database, scope: conn.scope, protocol: conn.protocol };
};
RT.mutate = (key, title) => {
	const r = RT.results[key] = { state: "pending", at: now() };
	RT.conn.mutate({ op: "issue.put", id: "m-" + key, payload: { id: key, title, done: false } }).then(
		(ack) => Object.assign(r, { state: "acked", ack, settledAt: now() }),
		(err) => Object.assign(r, { state: "rejected", name: err.name, message: err.message, settledAt: now() }));
	return true;
};
RT.read = async (store) => (await RT.conn.read(store)).map((r) => ({ key: r.key, value: r.value }));
RT.mute = (on) => { RT.muted = on ? RT.conn.lockName : null; return true; };
RT.locks = async () => {
	const q = await navigator.locks.query(), name = RT.conn.lockName;
	return { held: q.held.filter((l) => l.name === name).length, pending: q.pending.filter((l) => l.name === name).length };
};
RT.hasDatabase = async () => (await indexedDB.databases()).some((d) => d.name === RT.conn.database);
load({ wasmURL: "/dist/tabfence.wasm" }).then((tf) => { RT.tf = tf; RT.loaded = true; }, (err) => { RT.error = err.name + ": " + err.message; });
`

// ConnPage serves the test page at ConnPagePath in front of next.
func ConnPage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != ConnPagePath {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte(`<!doctype html><meta charset="utf-8"><title>tf.connection</title><script type="module">` + ConnJS + `</script>`))
	})
}

// ConnOptions are tf.connection's options a test sets (zero: the default).
type ConnOptions struct {
	Scope          string `json:"scope"`
	Protocol       int    `json:"protocol,omitempty"`
	User           string `json:"user,omitempty"`
	FencePath      string `json:"fencePath,omitempty"`
	Snapshot       string `json:"snapshot,omitempty"`
	PingEveryMs    int    `json:"pingEveryMs,omitempty"`
	PongTimeoutMs  int    `json:"pongTimeoutMs,omitempty"`
	StallAfterMs   int    `json:"stallAfterMs,omitempty"`
	HiddenNotifyMs int    `json:"hiddenNotifyMs,omitempty"`
}

// ConnNames are the names a connection reports.
type ConnNames struct {
	LockName string  `json:"lockName"`
	Database string  `json:"database"`
	Scope    string  `json:"scope"`
	Protocol float64 `json:"protocol"`
}

// OpenConn waits until the page loaded the runtime, then joins the
// connection with o.
func (t *Tab) OpenConn(o ConnOptions) (ConnNames, error) {
	err := Poll(context.Background(), "the runtime to load", 30*time.Second, 20*time.Millisecond, func() (bool, error) {
		s, err := Eval[string](t, `window.RT ? (RT.error ? "error: " + RT.error : String(RT.loaded)) : "false"`)
		if err == nil && len(s) > 6 && s[:6] == "error:" {
			return false, errors.New("harness: " + s)
		}
		return s == "true", err
	})
	if err != nil {
		return ConnNames{}, err
	}
	b, err := json.Marshal(o)
	if err != nil {
		return ConnNames{}, err
	}
	return Eval[ConnNames](t, `RT.open(`+string(b)+`)`)
}

// ConnStatus is Connection.status().
type ConnStatus struct {
	Leader             bool    `json:"leader"`
	State              string  `json:"state"`
	Version            float64 `json:"version"`
	Pending            int     `json:"pending"`
	OldestPendingAgeMs float64 `json:"oldestPendingAgeMs"`
	Token              float64 `json:"token"`
	LeaderID           string  `json:"leaderId"`
	ID                 string  `json:"id"`
	LastError          *string `json:"lastError"`
	Closed             *string `json:"closed"`
	Offline            bool    `json:"offline"`
	At                 float64 `json:"at,omitempty"` // page time, in RT.statuses
}

// ConnStatus reads the tab's status now.
func (t *Tab) ConnStatus() (ConnStatus, error) { return Eval[ConnStatus](t, `RT.conn.status()`) }

// ConnStatuses are the statuses the tab's onStatus heard, in order.
func (t *Tab) ConnStatuses() ([]ConnStatus, error) { return Eval[[]ConnStatus](t, `RT.statuses`) }

// ConnDelta is one delta the tab's onDelta heard.
type ConnDelta struct {
	At      float64  `json:"at"`
	Version float64  `json:"version"`
	Keys    []string `json:"keys"`
}

// ConnDeltas are the deltas the tab's onDelta heard, in order.
func (t *Tab) ConnDeltas() ([]ConnDelta, error) { return Eval[[]ConnDelta](t, `RT.deltas`) }

// ConnReloads are the versions the tab's onReload heard.
func (t *Tab) ConnReloads() ([]float64, error) {
	return Eval[[]float64](t, `RT.reloads.map((r) => r.version)`)
}

// Issue is one record of the demo's "issues" store.
type Issue struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Done  bool   `json:"done"`
	By    string `json:"by"`
}

// IssueRecord is one record Connection.read("issues") returned.
type IssueRecord struct {
	Key   string `json:"key"`
	Value Issue  `json:"value"`
}

// ConnIssues is Connection.read("issues").
func (t *Tab) ConnIssues() ([]IssueRecord, error) { return Eval[[]IssueRecord](t, `RT.read("issues")`) }

// MutationResult is how a mutate the page started (RT.mutate) settled.
type MutationResult struct {
	State string `json:"state"` // pending, acked, rejected
	Ack   struct {
		ID       string  `json:"id"`
		Status   float64 `json:"status"`
		Replayed bool    `json:"replayed"`
	} `json:"ack"`
	Name    string `json:"name"`
	Message string `json:"message"`
}

// Mutate starts an issue.put of key (idempotency key "m-"+key) in the
// tab; MutationOf reads how it settled.
func (t *Tab) Mutate(key, title string) error {
	k, _ := json.Marshal(key)
	v, _ := json.Marshal(title)
	_, err := Eval[bool](t, `RT.mutate(`+string(k)+`, `+string(v)+`)`)
	return err
}

// MutationOf reads how the tab's mutation of key settled so far.
func (t *Tab) MutationOf(key string) (MutationResult, error) {
	k, _ := json.Marshal(key)
	return Eval[MutationResult](t, `RT.results[`+string(k)+`] || { state: "unknown" }`)
}

// Snapshot is the demo server's GET /realtime/snapshot for one user.
type Snapshot struct {
	Version float64 `json:"version"`
	Changes []struct {
		Store   string `json:"store"`
		Key     string `json:"key"`
		Value   Issue  `json:"value"`
		Deleted bool   `json:"deleted"`
	} `json:"changes"`
}

// FetchSnapshot reads what the server holds for user.
func FetchSnapshot(ctx context.Context, baseURL, user string) (Snapshot, error) {
	var s Snapshot
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/realtime/snapshot", nil)
	if err != nil {
		return s, err
	}
	req.Header.Set("X-Demo-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, errors.New("harness: GET /realtime/snapshot: " + resp.Status)
	}
	err = json.NewDecoder(resp.Body).Decode(&s)
	return s, err
}

// RealtimeTap watches the server's WebSocket route from outside the server:
// every upgrade request with the status it was answered, and the sockets
// still open. Drop cuts them, as a server restart does.
type RealtimeTap struct {
	Path string // the route, "/realtime"

	mu       sync.Mutex
	statuses []int
	open     map[*tapConn]struct{}
}

// NewRealtimeTap taps path.
func NewRealtimeTap(path string) *RealtimeTap {
	return &RealtimeTap{Path: path, open: map[*tapConn]struct{}{}}
}

// Middleware puts the tap in front of next.
func (p *RealtimeTap) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != p.Path {
			next.ServeHTTP(w, r)
			return
		}
		p.mu.Lock()
		p.statuses = append(p.statuses, 0)
		tw := &tapWriter{ResponseWriter: w, tap: p, idx: len(p.statuses) - 1}
		p.mu.Unlock()
		next.ServeHTTP(tw, r)
	})
}

// Dials returns the status of every request to the route so far, in the
// order they arrived: 101 for an upgrade, 0 while none was written.
func (p *RealtimeTap) Dials() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.statuses...)
}

// Upgrades counts the dials answered 101.
func (p *RealtimeTap) Upgrades() int {
	n := 0
	for _, s := range p.Dials() {
		if s == http.StatusSwitchingProtocols {
			n++
		}
	}
	return n
}

// Open counts the upgraded connections not yet closed by either side.
func (p *RealtimeTap) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.open)
}

// Drop closes every open socket under the server and returns how many.
func (p *RealtimeTap) Drop() int {
	p.mu.Lock()
	conns := make([]*tapConn, 0, len(p.open))
	for c := range p.open {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return len(conns)
}

type tapWriter struct {
	http.ResponseWriter
	tap  *RealtimeTap
	idx  int
	sent bool
}

func (w *tapWriter) status(code int) {
	if w.sent {
		return
	}
	w.sent = true
	w.tap.mu.Lock()
	w.tap.statuses[w.idx] = code
	w.tap.mu.Unlock()
}

func (w *tapWriter) WriteHeader(code int) {
	w.status(code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *tapWriter) Write(b []byte) (int, error) {
	w.status(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

func (w *tapWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hands the server a connection whose Close the tap sees.
func (w *tapWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("harness: the response writer cannot hijack")
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return nil, nil, err
	}
	tc := &tapConn{Conn: c, tap: w.tap}
	w.tap.mu.Lock()
	w.tap.open[tc] = struct{}{}
	w.tap.mu.Unlock()
	return tc, brw, nil
}

type tapConn struct {
	net.Conn
	tap  *RealtimeTap
	once sync.Once
}

func (c *tapConn) Close() error {
	c.once.Do(func() {
		c.tap.mu.Lock()
		delete(c.tap.open, c)
		c.tap.mu.Unlock()
	})
	return c.Conn.Close()
}
