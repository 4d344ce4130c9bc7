package receiver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/sqlitestore"
	"github.com/tabfence/tabfence/wire"
)

// limitServer is a receiver over SQLite on a real loopback listener whose
// handler counts its runs and answers 201.
type limitServer struct {
	srv  *httptest.Server
	rc   *receiver.Receiver
	runs atomic.Int64
	seen atomic.Value // the last body the handler saw
}

func newLimitServer(t *testing.T, opts receiver.Options) *limitServer {
	t.Helper()
	return newLimitServerOn(t, opts, 0)
}

// newLimitServerOn is newLimitServer over a store whose transactions and
// reads each start delay late.
func newLimitServerOn(t *testing.T, opts receiver.Options, delay time.Duration) *limitServer {
	t.Helper()
	sqlite, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "r.db"))
	require.NoError(t, err)
	var store receiver.Store = sqlite
	if delay > 0 {
		store = slowStore{sqlite, delay}
	}
	ls := &limitServer{}
	opts.Scope = func(*http.Request) (string, error) { return "alice", nil }
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	rc := receiver.New(store, opts)
	ls.rc = rc
	mux := http.NewServeMux()
	mux.Handle("POST /things", rc.Handle(func(ctx context.Context, tx receiver.Tx, r *receiver.Request) (receiver.Response, error) {
		ls.runs.Add(1)
		ls.seen.Store(string(r.Body))
		return receiver.Response{Status: http.StatusCreated}, nil
	}))
	mux.Handle("POST /fence/{resource...}", rc.FenceHandler())
	ls.srv = httptest.NewServer(mux)
	t.Cleanup(func() { ls.srv.Close(); _ = store.Close() })
	return ls
}

// dial opens a raw connection and sends a request's head (and extra).
func (ls *limitServer) dial(t *testing.T, path, key string, contentLength int, extra string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", ls.srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nIdempotency-Key: %s\r\nContent-Length: %d\r\n%s\r\n",
		path, key, contentLength, extra)
	_, err = conn.Write([]byte(head))
	require.NoError(t, err)
	return conn
}

// readProblem reads one response from conn and decodes its problem body.
func readProblem(t *testing.T, conn net.Conn, within time.Duration) (*http.Response, receiver.Problem) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(within))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "no response within %s", within)
	defer resp.Body.Close()
	var p receiver.Problem
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p), "status %d: problem body", resp.StatusCode)
	return resp, p
}

// post sends a whole request through the standard client.
func (ls *limitServer) post(t *testing.T, key, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", ls.srv.URL+"/things", strings.NewReader(body))
	req.Header.Set(wire.HeaderIdempotencyKey, key)
	resp, err := ls.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// A client that sends its headers and then the body at a trickle is cut off
// with 408 once BodyTimeout has passed, and its connection closed.
func TestSlowBodyIsCutOff(t *testing.T) {
	ls := newLimitServer(t, receiver.Options{BodyTimeout: 300 * time.Millisecond})
	for _, path := range []string{"/things", "/fence/doc:1"} {
		conn := ls.dial(t, path, "slow", 100, "")
		stop := make(chan struct{})
		go func() { // one byte every 50 ms: 5 s for the whole body
			for i := 0; i < 100; i++ {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}()
		start := time.Now()
		if path == "/things" {
			resp, p := readProblem(t, conn, 3*time.Second)
			require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "%s: %d %+v, want 408 body-timeout", path, resp.StatusCode, p)
			require.Equal(t, wire.ProblemBodyTimeout, p.Type, "%s: %d %+v, want 408 body-timeout", path, resp.StatusCode, p)
			require.NotEqual(t, "", p.Detail, "%s: %d %+v, want 408 body-timeout", path, resp.StatusCode, p)
		}
		// The server closes the connection: a read sees EOF (or the reset
		// of a socket closed with our unread bytes in it), not a hang.
		_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := io.Copy(io.Discard, conn); err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("%s: connection not closed by the server: %v", path, err)
		}
		d := time.Since(start)
		require.GreaterOrEqual(t, d, 250*time.Millisecond, "%s: cut off after %s, before the deadline", path, d)
		close(stop)
	}
	require.Equal(t, int64(0), ls.runs.Load(), "the handler ran for a body that never arrived")
	// Nothing was stored under the key: a prompt retry runs.
	resp, _ := ls.post(t, "slow", strings.Repeat("x", 100))
	require.Equal(t, 201, resp.StatusCode, "retry: %d replayed", resp.StatusCode)
	require.Equal(t, "", resp.Header.Get(wire.HeaderReplayed), "retry: %d replayed", resp.StatusCode)
}

// Uploads held open are charged the bytes they hold; past MaxBodyMemory
// further requests get 503 with Retry-After, nothing stored, and the memory
// comes back when the held uploads end.
func TestHeldUploadsBeyondMemoryCapGet503(t *testing.T) {
	const maxBody, held = 1000, 4
	ls := newLimitServer(t, receiver.Options{MaxBody: maxBody, MaxBodyMemory: held * maxBody, BodyTimeout: time.Minute})
	conns := make([]net.Conn, held)
	for i := range conns {
		conns[i] = ls.dial(t, "/things", fmt.Sprint("held", i), maxBody, "")
		_, err := conns[i].Write([]byte(strings.Repeat("x", maxBody-1)))
		require.NoError(t, err)
	}
	// Probe only once every held upload is charged: a probe in flight while
	// the last one arrived would have it refused, and the cap never fill.
	deadline := time.Now().Add(10 * time.Second)
	for ls.rc.BodiesInUse() < held*maxBody {
		if time.Now().After(deadline) {
			t.Fatalf("the held uploads were not charged: %d of %d bytes", ls.rc.BodiesInUse(), held*maxBody)
		}
		time.Sleep(time.Millisecond)
	}
	// A 1-byte probe that gets in is answered and gives its byte back; it
	// is refused once all the held uploads are charged.
	for i := 0; ; i++ {
		resp, _ := ls.post(t, fmt.Sprint("probe", i), "z")
		if resp.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held uploads never filled the cap: probe %d got %d", i, resp.StatusCode)
		}
	}
	resp, body := ls.post(t, "big", strings.Repeat("y", maxBody))
	var p receiver.Problem
	_ = json.Unmarshal(body, &p)
	require.Equal(t, 503, resp.StatusCode, "past the cap: %d %s Retry-After %q, want 503 server-busy", resp.StatusCode, body, resp.Header.Get(wire.HeaderRetryAfter))
	require.Equal(t, wire.ProblemBusy, p.Type, "past the cap: %d %s Retry-After %q, want 503 server-busy", resp.StatusCode, body, resp.Header.Get(wire.HeaderRetryAfter))
	require.Equal(t, "1", resp.Header.Get(wire.HeaderRetryAfter), "past the cap: %d %s Retry-After %q, want 503 server-busy", resp.StatusCode, body, resp.Header.Get(wire.HeaderRetryAfter))
	runs := ls.runs.Load()
	for _, c := range conns {
		_ = c.Close()
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		resp, _ = ls.post(t, "after", strings.Repeat("y", maxBody))
		if resp.StatusCode != 503 || time.Now().After(deadline) {
			break
		}
	}
	require.Equal(t, 201, resp.StatusCode, "after the held uploads ended: %d, runs %d -> %d", resp.StatusCode, runs, ls.runs.Load())
	require.Equal(t, runs+1, ls.runs.Load(), "after the held uploads ended: %d, runs %d -> %d", resp.StatusCode, runs, ls.runs.Load())
	// The 503 stored nothing under its key.
	resp, _ = ls.post(t, "big", strings.Repeat("y", maxBody))
	require.Equal(t, 201, resp.StatusCode, "retry of a refused key: %d replayed", resp.StatusCode)
	require.Equal(t, "", resp.Header.Get(wire.HeaderReplayed), "retry of a refused key: %d replayed", resp.StatusCode)
}

// A declared Content-Length above MaxBody is answered 413 before the body is
// read, so a client that waits for 100 Continue never sends it.
func TestOversizedDeclaredBodyGetsNo100Continue(t *testing.T) {
	ls := newLimitServer(t, receiver.Options{MaxBody: 1000})
	conn := ls.dial(t, "/things", "big", 1001, "Expect: 100-continue\r\n")
	resp, p := readProblem(t, conn, 5*time.Second)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%d %+v, want 413 body-too-large first (not 100 Continue)", resp.StatusCode, p)
	require.Equal(t, wire.ProblemBodyTooLarge, p.Type, "%d %+v, want 413 body-too-large first (not 100 Continue)", resp.StatusCode, p)
	require.NotEqual(t, "", p.Detail, "%d %+v, want 413 body-too-large first (not 100 Continue)", resp.StatusCode, p)
	require.Equal(t, int64(0), ls.runs.Load(), "handler ran")
}

// A body cut short by the client is a 400 body-unreadable that says so.
func TestTruncatedBodyProblemHasDetail(t *testing.T) {
	ls := newLimitServer(t, receiver.Options{})
	conn := ls.dial(t, "/things", "cut", 100, "")
	_, _ = conn.Write([]byte("0123456789"))
	_ = conn.(*net.TCPConn).CloseWrite()
	resp, p := readProblem(t, conn, 5*time.Second)
	require.Equal(t, 400, resp.StatusCode, "%d %+v, want 400 body-unreadable with a detail", resp.StatusCode, p)
	require.Equal(t, wire.ProblemBodyUnreadable, p.Type, "%d %+v, want 400 body-unreadable with a detail", resp.StatusCode, p)
	require.NotEqual(t, "", p.Detail, "%d %+v, want 400 body-unreadable with a detail", resp.StatusCode, p)
}

// RejectInvalidUTF8 refuses a body that is not UTF-8 before the handler or
// the idempotency record see it; without it the handler gets the raw bytes.
func TestRejectInvalidUTF8(t *testing.T) {
	ls := newLimitServer(t, receiver.Options{RejectInvalidUTF8: true})
	resp, b := ls.post(t, "k1", `{"id":"coll`+"\xff"+`"}`)
	var p receiver.Problem
	_ = json.Unmarshal(b, &p)
	require.Equal(t, 422, resp.StatusCode, "invalid UTF-8: %d %s, runs %d; want 422 invalid-utf8 before the handler", resp.StatusCode, b, ls.runs.Load())
	require.Equal(t, wire.ProblemInvalidUTF8, p.Type, "invalid UTF-8: %d %s, runs %d; want 422 invalid-utf8 before the handler", resp.StatusCode, b, ls.runs.Load())
	require.Equal(t, int64(0), ls.runs.Load(), "invalid UTF-8: %d %s, runs %d; want 422 invalid-utf8 before the handler", resp.StatusCode, b, ls.runs.Load())
	// Nothing stored: the same key with a corrected body runs.
	resp, _ = ls.post(t, "k1", `{"id":"coll"}`)
	require.Equal(t, 201, resp.StatusCode, "corrected retry")
	require.Equal(t, "", resp.Header.Get(wire.HeaderReplayed), "corrected retry")
	raw := newLimitServer(t, receiver.Options{})
	if resp, _ := raw.post(t, "k1", "\xfe\xff"); resp.StatusCode != 201 || raw.seen.Load() != "\xfe\xff" {
		t.Fatalf("without the option: %d, handler saw %q", resp.StatusCode, raw.seen.Load())
	}
}

// A server whose ReadTimeout is stricter than BodyTimeout keeps it.
func TestStricterServerReadTimeoutKept(t *testing.T) {
	ls := newLimitServer(t, receiver.Options{BodyTimeout: time.Minute})
	h := ls.srv.Config.Handler
	ls.srv.Close()
	ls.srv = httptest.NewUnstartedServer(h) // closed by newLimitServer's cleanup
	ls.srv.Config.ReadTimeout = 300 * time.Millisecond
	ls.srv.Start()
	conn := ls.dial(t, "/things", "k", 100, "")
	_, _ = conn.Write([]byte("x")) // and no more
	resp, p := readProblem(t, conn, 5*time.Second)
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "%d %+v, want 408 body-timeout after the server's ReadTimeout", resp.StatusCode, p)
	require.Equal(t, wire.ProblemBodyTimeout, p.Type, "%d %+v, want 408 body-timeout after the server's ReadTimeout", resp.StatusCode, p)
}

// slowStore is a store whose every transaction and read starts delay late,
// as a loaded database does; a canceled context ends the wait.
type slowStore struct {
	receiver.Store
	delay time.Duration
}

func (s slowStore) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(s.delay):
		return nil
	}
}

func (s slowStore) Begin(ctx context.Context) (receiver.WriteTx, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return s.Store.Begin(ctx)
}

func (s slowStore) View(ctx context.Context, fn func(q receiver.Tx) error) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	return s.Store.View(ctx, fn)
}

// Database work slower than BodyTimeout still succeeds: the deadline bounds
// the reading of the body only, for a fence request with a body or without
// one, as for a mutation.
func TestSlowStoreOutlastsBodyTimeout(t *testing.T) {
	const bodyTimeout = 200 * time.Millisecond
	ls := newLimitServerOn(t, receiver.Options{BodyTimeout: bodyTimeout}, 3*bodyTimeout)
	for i, c := range []struct{ path, body string }{
		{"/fence/doc:1", ""}, {"/fence/doc:1", "{}"}, {"/things", "x"},
	} {
		req, _ := http.NewRequest("POST", ls.srv.URL+c.path, strings.NewReader(c.body))
		req.Header.Set(wire.HeaderIdempotencyKey, fmt.Sprint("k", i))
		start := time.Now()
		resp, err := ls.srv.Client().Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, 2, resp.StatusCode/100, "%s with body %q after %s: %d %s, want success", c.path, c.body, time.Since(start), resp.StatusCode, b)
		d := time.Since(start)
		require.GreaterOrEqual(t, d, 3*bodyTimeout, "%s: answered after %s, before the store's delay", c.path, d)
	}
}
