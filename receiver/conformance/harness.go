// Package conformance is the one test suite every receiver.Store must pass.
// Each store's tests call Run with a function that makes a fresh database.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/wire"
)

// Opener opens the store of one fresh database. It may be called again after
// the previous store was closed, to simulate a server restart, or while it is
// open, as a second server instance on the same database would: the second
// store must see what the first committed.
type Opener func(ctx context.Context) (receiver.Store, error)

// NewDB makes a fresh, empty database for one test and returns its Opener.
type NewDB func(t *testing.T) Opener

// clock is a settable test clock.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// env is one test's server: a receiver over a fresh store, mounted on a real
// loopback TCP listener.
type env struct {
	t      *testing.T
	open   Opener
	store  receiver.Store
	rc     *receiver.Receiver
	srv    *httptest.Server
	clock  *clock
	opts   receiver.Options
	mw     func(http.Handler) http.Handler
	wrap   func(receiver.Store) receiver.Store // e.g. to inject store faults
	client *http.Client

	mu       sync.Mutex
	attempts map[string]int
	started  chan struct{}
	unblock  chan struct{}
	// crashed is set by the "crashonce" mode: the process is dead from
	// then on (see crashStore).
	crashed atomic.Bool
}

const testUserHeader = "X-Test-User"

func newEnv(t *testing.T, newDB NewDB, tweak func(*env)) *env {
	e := &env{t: t, open: newDB(t), clock: &clock{}, attempts: map[string]int{},
		started: make(chan struct{}, 1), unblock: make(chan struct{})}
	e.opts = receiver.Options{
		Scope: func(r *http.Request) (string, error) {
			if u := r.Header.Get(testUserHeader); u != "" {
				return u, nil
			}
			return "", receiver.ErrUnauthenticated
		},
		Clock:   e.clock.now,
		MaxBody: 4096,
	}
	if tweak != nil {
		tweak(e)
	}
	e.start()
	t.Cleanup(e.stop)
	return e
}

func (e *env) start() {
	ctx := context.Background()
	st, err := e.open(ctx)
	require.NoError(e.t, err, "open store")
	tx, err := st.Begin(ctx)
	if err == nil {
		_, err = tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS conf_effects (scope TEXT NOT NULL, idem_key TEXT NOT NULL, n BIGINT NOT NULL)`)
		if err == nil {
			_, err = tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS conf_text (idem_key TEXT NOT NULL, body TEXT NOT NULL)`)
		}
		if err == nil {
			_, err = tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS conf_unique (v TEXT PRIMARY KEY)`)
		}
		if err == nil {
			err = tx.Commit()
		}
	}
	require.NoError(e.t, err, "create test table")
	e.store = st
	if e.wrap != nil {
		st = e.wrap(st)
	}
	e.rc = receiver.New(st, e.opts)
	e.srv = httptest.NewServer(e.routes(e.rc))
	e.client = e.srv.Client()
	e.client.Timeout = 30 * time.Second
}

// routes mounts the test handler on rc: single requests, batches, fences.
func (e *env) routes(rc *receiver.Receiver) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /things", rc.Handle(e.handler))
	mux.Handle("POST /things/batch", rc.HandleBatch(e.handler))
	mux.Handle("POST /fence/{resource...}", rc.FenceHandler())
	var h http.Handler = mux
	if e.mw != nil {
		h = e.mw(h)
	}
	return h
}

func (e *env) stop() {
	if e.srv != nil {
		e.srv.Close()
		e.srv = nil
	}
	if e.store != nil {
		_ = e.store.Close()
		e.store = nil
	}
}

// restart closes the server and the store and opens both again.
func (e *env) restart() {
	e.stop()
	e.start()
}

// command is the test handler's body.
type command struct {
	Mode string `json:"mode"` // ok, reject, flaky500, flakyerr, flakypanic, block, text, crashonce, dupreject, dupfail, badsql
	Data string `json:"data,omitempty"`
}

// handler records one effect row per run, then answers according to Mode.
// Failing modes write the effect first, to prove it is rolled back.
func (e *env) handler(ctx context.Context, tx receiver.Tx, r *receiver.Request) (receiver.Response, error) {
	var c command
	if err := json.Unmarshal(r.Body, &c); err != nil {
		return receiver.ProblemResponse(receiver.Problem{Type: wire.ProblemBase + "bad-json", Title: "bad json", Status: 400}), nil
	}
	if c.Mode == "badsql" { // a first statement the database refuses before running it
		_, err := tx.Exec(ctx, `INSERT INTO conf_no_such_table (idem_key) VALUES ($1)`, r.Key)
		return receiver.Response{}, errors.Join(errors.New("conformance: badsql ran"), err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO conf_effects (scope, idem_key, n) VALUES ($1, $2, 1)`, r.Scope, r.Key); err != nil {
		return receiver.Response{}, err
	}
	e.mu.Lock()
	e.attempts[r.Scope+"\x00"+r.Key]++
	first := e.attempts[r.Scope+"\x00"+r.Key] == 1
	e.mu.Unlock()
	switch c.Mode {
	case "reject":
		return receiver.ProblemResponse(receiver.Problem{Type: wire.ProblemBase + "invalid", Title: "invalid command", Status: 422}), nil
	case "flaky500":
		if first {
			return receiver.Response{Status: 503, Body: []byte("try again")}, nil
		}
	case "flakyerr":
		if first {
			return receiver.Response{}, errors.New("database on fire")
		}
	case "flakypanic":
		if first {
			panic("handler bug")
		}
	case "block":
		e.started <- struct{}{}
		<-e.unblock
	case "crashonce": // the process dies after this write, before any commit
		if first {
			e.crashed.Store(true)
			return receiver.Response{}, errCrashed
		}
	case "dupreject", "dupfail": // inserts Data into conf_unique: a constraint violation when it is there
		if _, err := tx.Exec(ctx, `INSERT INTO conf_unique (v) VALUES ($1)`, c.Data); err != nil {
			if c.Mode == "dupfail" {
				return receiver.Response{Status: 503, Body: []byte("constraint failed")}, nil
			}
			return receiver.ProblemResponse(receiver.Problem{Type: wire.ProblemBase + "duplicate", Title: "duplicate", Status: 409}), nil
		}
	case "text": // stores Data in a TEXT column
		if _, err := tx.Exec(ctx, `INSERT INTO conf_text (idem_key, body) VALUES ($1, $2)`, r.Key, c.Data); err != nil {
			return receiver.Response{}, err
		}
	}
	resp, err := receiver.JSON(http.StatusCreated, map[string]any{"key": r.Key, "token": r.Token, "data": c.Data})
	resp.Header.Set("Location", "/things/"+r.Key)
	resp.Header.Set("X-Not-Stored", "1")
	return resp, err
}

// effects counts committed handler runs.
func (e *env) effects() int {
	e.t.Helper()
	var n int64
	err := e.store.View(context.Background(), func(q receiver.Tx) error {
		return q.QueryRow(context.Background(), `SELECT COUNT(*) FROM conf_effects`).Scan(&n)
	})
	require.NoError(e.t, err, "count effects")
	return int(n)
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) problem(t *testing.T) receiver.Problem {
	t.Helper()
	var p receiver.Problem
	ct := r.header.Get("Content-Type")
	require.Equal(t, wire.ContentTypeProblem, ct, "Content-Type = %q, want %q (status %d, body %s)", ct, wire.ContentTypeProblem, r.status, r.body)
	require.NoError(t, json.Unmarshal(r.body, &p), "problem body %q", r.body)
	require.Equal(t, r.status, p.Status, "incomplete problem %+v for status %d", p, r.status)
	require.NotEqual(t, "", p.Type, "incomplete problem %+v for status %d", p, r.status)
	require.NotEqual(t, "", p.Title, "incomplete problem %+v for status %d", p, r.status)
	return p
}

func (r reply) replayed() bool { return r.header.Get(wire.HeaderReplayed) == "true" }

// req is one test request.
type req struct {
	user, key, resource, token string
	body                       string
	hdr                        map[string]string
}

func (e *env) do(q req) reply {
	e.t.Helper()
	r, err := e.try(q)
	require.NoError(e.t, err, "POST /things")
	return r
}

func (e *env) try(q req) (reply, error) { return e.tryAt(e.srv.URL, q) }

// tryAt sends q to the server at base (another instance's).
func (e *env) tryAt(base string, q req) (reply, error) {
	hr, err := http.NewRequest(http.MethodPost, base+"/things", bytes.NewBufferString(q.body))
	if err != nil {
		return reply{}, err
	}
	if q.user != "" {
		hr.Header.Set(testUserHeader, q.user)
	}
	if q.key != "" {
		hr.Header.Set(wire.HeaderIdempotencyKey, q.key)
	}
	if q.resource != "" {
		hr.Header.Set(wire.HeaderResource, q.resource)
	}
	if q.token != "" {
		hr.Header.Set(wire.HeaderFencingToken, q.token)
	}
	for k, v := range q.hdr {
		hr.Header.Set(k, v)
	}
	resp, err := e.client.Do(hr)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// issue gets the next fencing token for (user, resource).
func (e *env) issue(user, resource string) uint64 {
	e.t.Helper()
	hr, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/fence/"+resource, nil)
	if user != "" {
		hr.Header.Set(testUserHeader, user)
	}
	resp, err := e.client.Do(hr)
	require.NoError(e.t, err, "POST /fence")
	defer resp.Body.Close()
	var out struct {
		Resource string `json:"resource"`
		Token    uint64 `json:"token"`
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		e.t.Fatalf("POST /fence/%s: %d %s", resource, resp.StatusCode, b)
	}
	require.NoError(e.t, json.NewDecoder(resp.Body).Decode(&out), "POST /fence/%s: %+v", resource, out)
	require.Equal(e.t, resource, out.Resource, "POST /fence/%s: %+v", resource, out)
	require.NotEqual(e.t, uint64(0), out.Token, "POST /fence/%s: %+v", resource, out)
	return out.Token
}

func tok(n uint64) string { return strconv.FormatUint(n, 10) }

const okBody = `{"mode":"ok","data":"x"}`
