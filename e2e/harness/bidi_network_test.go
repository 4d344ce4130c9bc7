//go:build e2e

package harness

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// transfersOf returns the finished transfers of log whose path is path.
func transfersOf(log *NetLog, path string) []Transfer {
	var out []Transfer
	for _, tr := range log.Transfers() {
		if u, _, _ := strings.Cut(tr.URL, "?"); tr.Finished && strings.HasSuffix(u, path) {
			out = append(out, tr)
		}
	}
	return out
}

// A Firefox tab's network log records its own requests only: the first
// load of a cacheable resource with its wire size, the next from the
// cache with none, a request that reaches no server as finished with no
// status; closing a tab ends its log and leaves the other's recording.
func TestBiDiWatchNetwork(t *testing.T) {
	e, srv := startFirefox(t, Options{}), newBiDiServer(t)
	a := &Tab{p: openPage(t, e, true, srv.URL+"/"), kind: KindFirefox}
	b := &Tab{p: openPage(t, e, true, srv.URL+"/"), kind: KindFirefox}
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	aLog, err := a.WatchNetwork()
	require.NoError(t, err)
	bLog, err := b.WatchNetwork()
	require.NoError(t, err)

	// A port nothing listens on: the fetch fails without a response.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gone := "http://" + l.Addr().String() + "/gone"
	require.NoError(t, l.Close())

	load := `fetch("/cacheable").then(r => r.text())`
	require.Equal(t, "cached", evalIn[string](t, a.p, load))
	require.Equal(t, "cached", evalIn[string](t, a.p, load))
	require.Equal(t, "cached", evalIn[string](t, b.p, load))
	require.False(t, evalIn[bool](t, b.p, `fetch("`+gone+`", {mode: "no-cors"}).then(() => true, () => false)`))
	require.EqualValues(t, 1, srv.hits["/cacheable"].Load())

	require.NoError(t, Poll(t.Context(), "both tabs' transfers finished", 15*time.Second, 20*time.Millisecond, func() (bool, error) {
		return len(transfersOf(aLog, "/cacheable")) == 2 && len(transfersOf(bLog, "/cacheable")) == 1 &&
			len(transfersOf(bLog, "/gone")) == 1, nil
	}))
	got := transfersOf(aLog, "/cacheable")
	first, again := got[0], got[1]
	require.EqualValues(t, 200, first.Status, "%+v", first)
	require.False(t, first.FromCache, "%+v", first)
	require.Greater(t, first.Wire, float64(len("cached")), "the headers and body came over the wire: %+v", first)
	require.True(t, again.FromCache, "%+v", again)
	require.Zero(t, again.Wire, "%+v", again)
	other := transfersOf(bLog, "/cacheable")[0]
	require.True(t, other.FromCache, "the other tab shares the cache: %+v", other)
	failed := transfersOf(bLog, "/gone")[0]
	require.Zero(t, failed.Status, "%+v", failed)
	require.Zero(t, failed.Wire, "%+v", failed)
	require.Len(t, aLog.Transfers(), 2, "a's log holds only a's requests: %+v", aLog.Transfers())

	b.Close()
	e.conn.mu.Lock()
	listeners := len(e.conn.listeners)
	e.conn.mu.Unlock()
	require.Equal(t, 1, listeners, "closing b removed its log's listener")
	bLog.Reset()
	aLog.Reset()
	require.Equal(t, "cached", evalIn[string](t, a.p, load))
	require.NoError(t, Poll(t.Context(), "a still records", 15*time.Second, 20*time.Millisecond, func() (bool, error) {
		return len(transfersOf(aLog, "/cacheable")) == 1, nil
	}))
	require.Empty(t, bLog.Transfers())
}
