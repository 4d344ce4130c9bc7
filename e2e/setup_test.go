//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/e2e/harness"
)

// distDir is the runtime `make build` writes.
var distDir = filepath.Join("..", "dist")

// Deadlines are generous: the machine is shared and a tab's wasm start
// costs CPU. Waits end as soon as their condition holds.
const (
	startTimeout    = 20 * time.Second
	failoverTimeout = 10 * time.Second
)

type env struct {
	t   *testing.T
	b   *harness.Browser
	srv *server.Local
}

// setup starts the server and a browser of kind k for one test. throttle
// keeps the browser's background-tab throttling and opens the tabs in one window,
// so all but the newest are hidden, as a user's background tabs are.
func setup(t *testing.T, k harness.Kind, throttle bool) *env {
	t.Helper()
	srv, err := startServer(nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	b, err := harness.Start(context.Background(), harness.Options{Browser: k, Throttle: throttle, SharedWindow: throttle})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return &env{t: t, b: b, srv: srv}
}

// setupServing is setup (browser in the foreground) with mw in front of
// the server: test routes, delays, headers.
func setupServing(t *testing.T, k harness.Kind, mw func(http.Handler) http.Handler) *env {
	t.Helper()
	srv, err := startServer(mw)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	b, err := harness.Start(context.Background(), harness.Options{Browser: k})
	require.NoError(t, err)
	t.Cleanup(b.Close)
	return &env{t: t, b: b, srv: srv}
}

var scopeSeq atomic.Int64

// scope is a fresh election scope, so tests never see each other's locks.
func scope(t *testing.T) string {
	return strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + strconv.FormatInt(scopeSeq.Add(1), 10)
}

func (e *env) pageURL(page, scope string, protocol int) string {
	q := url.Values{"scope": {scope}, "protocol": {strconv.Itoa(protocol)}}
	return e.srv.URL + "/" + page + "?" + q.Encode()
}

// open opens a page (the demo unless page says otherwise) and returns once
// the page has joined the election.
func (e *env) open(page, scope string, protocol int, joined string) *harness.Tab {
	e.t.Helper()
	tab, err := e.b.Open(e.pageURL(page, scope, protocol))
	require.NoError(e.t, err)
	e.t.Cleanup(tab.Close)
	_, err = tab.WaitEvent(joined, 1, startTimeout)
	require.NoError(e.t, err)
	return tab
}

// demo opens the demo page and waits until it leads (want "leader") or
// waits in the queue ("follower").
func (e *env) demo(scope string, protocol int, want string) *harness.Tab {
	e.t.Helper()
	tab := e.open("", scope, protocol, "joined")
	_, err := tab.WaitEvent(want, 1, startTimeout)
	require.NoError(e.t, err, "new tab never became %s", want)
	return tab
}

// leaders returns the indexes of the open tabs that say they lead.
func leaders(t *testing.T, tabs []*harness.Tab) []int {
	t.Helper()
	var out []int
	for i, tab := range tabs {
		if tab.Closed() {
			continue
		}
		ok, err := tab.IsLeader()
		require.NoError(t, err, "tab %d", i)
		if ok {
			out = append(out, i)
		}
	}
	return out
}

func lockName(t *testing.T, tab *harness.Tab) string {
	t.Helper()
	name, err := harness.Eval[string](tab, `tabfenceDemo.election.lockName`)
	require.NoError(t, err)
	return name
}

// eval runs JavaScript in a tab and fails the test on error.
func eval[T any](t *testing.T, tab *harness.Tab, js string) T {
	t.Helper()
	v, err := harness.Eval[T](tab, js)
	// t.Fatalf, not require: enqueue reaches here from goroutines too.
	if err != nil {
		t.Fatalf("eval %q: %v", js, err)
	}
	return v
}

// startServer serves the runtime built in distDir (see server.StartLocal),
// failing clearly when it was not built.
func startServer(mw func(http.Handler) http.Handler) (*server.Local, error) {
	if err := harness.CheckDist(distDir); err != nil {
		return nil, err
	}
	return server.StartLocal(distDir, mw)
}
