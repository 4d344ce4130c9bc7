//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/e2e/harness"
)

// obHealth is the part of the outbox status that says whether sending works.
type obHealth struct {
	Pending, Failed, Acked int
	Failing                bool
	Failure                *string
	NextAttemptAt          *float64
	FailingSince           *float64
	LastError              *struct{ Code, Message string }
}

// restartable is the demo server on a fixed loopback port that a test stops
// (connections refused, as for a server that is down) and starts again, on
// the same database: the tabs keep their origin.
type restartable struct {
	t    *testing.T
	h    *server.Server
	addr string
	mu   sync.Mutex
	ts   *httptest.Server
}

func (r *restartable) start() {
	r.t.Helper()
	var ln net.Listener
	err := harness.Poll(context.Background(), "listen on "+r.addr, 10*time.Second, 50*time.Millisecond, func() (bool, error) {
		var err error
		ln, err = net.Listen("tcp", r.addr)
		return err == nil, nil
	})
	require.NoError(r.t, err)
	ts := httptest.NewUnstartedServer(r.h)
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	r.mu.Lock()
	r.ts = ts
	r.mu.Unlock()
}

func (r *restartable) stop() {
	r.mu.Lock()
	ts := r.ts
	r.ts = nil
	r.mu.Unlock()
	if ts != nil {
		ts.CloseClientConnections()
		ts.Close()
	}
}

func setupRestartable(t *testing.T, k harness.Kind) (*obEnv, *restartable) {
	t.Helper()
	require.NoError(t, harness.CheckDist(distDir))
	ctl := newNoteCtl()
	srv, err := server.New(server.Config{
		DB: filepath.Join(t.TempDir(), "e2e.db"), Dist: distDir,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Middleware: ctl.middleware,
	})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &restartable{t: t, h: srv, addr: ln.Addr().String()}
	ln.Close()
	r.start()
	t.Cleanup(func() { r.stop(); srv.Close() })
	b, err := harness.Start(context.Background(), harness.Options{Browser: k})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return &obEnv{t: t, b: b, url: "http://" + r.addr, ctl: ctl}, r
}

func waitHealth(t *testing.T, tab *harness.Tab, what string, cond func(obHealth) bool) obHealth {
	t.Helper()
	var st obHealth
	err := harness.Poll(context.Background(), what, 20*time.Second, 30*time.Millisecond, func() (bool, error) {
		v, err := harness.Eval[obHealth](tab, `tabfenceNotes.outbox.status()`)
		st = v
		return err == nil && cond(v), err
	})
	require.NoError(t, err, "%v (last %+v)", err, describeHealth(st))
	return st
}

func describeHealth(s obHealth) string {
	b, _ := json.Marshal(s)
	return string(b) + " now " + strconv.FormatFloat(harness.NowMs(), 'f', 0, 64)
}

// failingWith reports whether s says that sending fails for kind, with a
// reason and a next attempt after now.
func failingWith(s obHealth, kind string, now float64) bool {
	return s.Failing && s.Failure != nil && *s.Failure == kind && s.LastError != nil && s.LastError.Message != "" &&
		s.FailingSince != nil && s.NextAttemptAt != nil && *s.NextAttemptAt > now
}

func healthy(s obHealth) bool {
	return !s.Failing && s.Failure == nil && s.LastError == nil && s.NextAttemptAt == nil
}

// fetchFailed is the TypeError text each browser gives a fetch that
// reached no server: the status passes the browser's reason on as it is.
var fetchFailed = map[harness.Kind]string{
	harness.KindChromium: "Failed to fetch",
	harness.KindFirefox:  "NetworkError when attempting to fetch resource",
}

// The server is stopped under two tabs with pending records: both tabs'
// status says that sending fails, that the server is unreachable, why, and
// when the next attempt is; restarted, the queue drains and both statuses
// clear. Then the same for a server that answers 500.
func TestOutboxStatusServerDown(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e, srv := setupRestartable(t, k)
		q := scope(t)
		fast := url.Values{"backoffBase": {"200"}, "backoffCap": {"1500"}}
		tabs := []*harness.Tab{e.tab(q, "alice", fast), e.tab(q, "alice", fast)}
		for _, tab := range tabs {
			waitHealth(t, tab, "healthy at start", healthy)
		}

		srv.stop()
		enqueue(t, tabs[0], "down", 3)
		for i, tab := range tabs {
			st := waitHealth(t, tab, "unreachable in tab "+strconv.Itoa(i), func(s obHealth) bool {
				// Waiting, not yet sent (the fencing token request failed) or
				// sent and failed (a flush in progress when the server stopped).
				return s.Pending+s.Failed == 3 && failingWith(s, "unreachable", harness.NowMs())
			})
			require.Contains(t, st.LastError.Message, fetchFailed[k], "tab %d: lastError %+v", i, *st.LastError)
		}
		srv.start()
		for _, tab := range tabs {
			waitHealth(t, tab, "drained and healthy", func(s obHealth) bool { return s.Acked == 3 && s.Pending == 0 && healthy(s) })
		}
		e.waitEffects(3, 10*time.Second)

		e.ctl.set(func(c *noteCtl) { c.fail500 = 1 << 30 })
		enqueue(t, tabs[1], "five", 1)
		for _, tab := range tabs {
			st := waitHealth(t, tab, "server-error", func(s obHealth) bool {
				return s.Failed == 1 && failingWith(s, "server-error", harness.NowMs())
			})
			require.Equal(t, "http_500", st.LastError.Code, "lastError %+v", *st.LastError)
		}
		e.ctl.set(func(c *noteCtl) { c.fail500 = 0 })
		for _, tab := range tabs {
			waitHealth(t, tab, "drained and healthy", func(s obHealth) bool { return s.Acked == 4 && s.Failed == 0 && healthy(s) })
		}
		e.waitEffects(4, 10*time.Second)
	})
}
