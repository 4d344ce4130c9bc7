//go:build e2e

package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// The module goes over the wire as its brotli copy, and a second load of
// the page takes it from the browser's cache without asking: the served
// loader names it by its content's hash, which the server marks immutable.
// A second tab takes it from the same cache. Chromium and Firefox report
// all three loads alike (Firefox's cache hits too have fromCache and no
// bytes received), so the assertions are the same in both.
func TestModuleOnTheWireIsBrotliAndCached(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		br, err := os.Stat(filepath.Join(distDir, "tabfence.wasm.br"))
		require.NoError(t, err, "make build writes tabfence.wasm.br")
		var mu sync.Mutex
		var sent []int // the server's statuses for the module
		e := setupServing(t, k, func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, ".wasm") {
					next.ServeHTTP(w, r)
					return
				}
				sw := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
				next.ServeHTTP(sw, r)
				mu.Lock()
				sent = append(sent, sw.status)
				mu.Unlock()
			})
		})
		statuses := func() []int {
			mu.Lock()
			defer mu.Unlock()
			return append([]int(nil), sent...)
		}
		tab, err := e.b.Open(e.srv.URL + "/raw-locks.html")
		require.NoError(t, err)
		t.Cleanup(tab.Close)
		net, err := tab.WatchNetwork()
		require.NoError(t, err)

		load := func(tab *harness.Tab, net *harness.NetLog) harness.Transfer {
			t.Helper()
			_, err := harness.Eval[string](tab, `import("/dist/tabfence.js").then((m) => m.load()).then((tf) => tf.lockName("s", 1))`)
			require.NoError(t, err)
			var tr harness.Transfer
			require.NoError(t, harness.Poll(t.Context(), "the module's transfer finished", startTimeout, 20*time.Millisecond, func() (bool, error) {
				var ok bool
				tr, ok = net.Finished("/dist/tabfence.wasm")
				return ok, nil
			}))
			return tr
		}
		first := load(tab, net)
		t.Logf("first load: %+v, brotli file %d bytes", first, br.Size())
		require.Equal(t, int64(200), first.Status)
		require.Equal(t, "br", first.Encoding)
		assert.False(t, first.FromCache)
		assert.GreaterOrEqual(t, first.Wire, float64(br.Size()), "the body on the wire is the brotli file")
		assert.Less(t, first.Wire, float64(br.Size()+1024), "the body on the wire is the brotli file, plus headers")

		net.Reset()
		require.NoError(t, tab.Navigate(e.srv.URL+"/raw-locks.html"))
		again := load(tab, net)
		t.Logf("repeat load: %+v", again)
		assert.True(t, again.FromCache, "from the cache: %+v", again)
		assert.Equal(t, []int{200}, statuses(), "the second load asked the server nothing: %+v", again)
		assert.Zero(t, again.Wire, "nothing on the wire: %+v", again)

		// A second tab shares the cache, and each tab's log holds only its
		// own requests.
		net.Reset()
		other, err := e.b.Open(e.srv.URL + "/raw-locks.html")
		require.NoError(t, err)
		t.Cleanup(other.Close)
		otherNet, err := other.WatchNetwork()
		require.NoError(t, err)
		second := load(other, otherNet)
		t.Logf("second tab: %+v", second)
		assert.True(t, second.FromCache, "from the cache: %+v", second)
		assert.Zero(t, second.Wire, "nothing on the wire: %+v", second)
		assert.Equal(t, []int{200}, statuses(), "the second tab asked the server nothing: %+v", second)
		assert.Empty(t, net.Transfers(), "the first tab's log holds the second tab's requests")
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (w *statusRecorder) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
