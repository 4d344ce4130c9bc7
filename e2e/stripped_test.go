//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
	"github.com/tabfence/tabfence/internal/wasmpack"
)

// TestStrippedModuleRuns: what `make build` ships has lost its file and
// line tables (wasmpack -strip-lines). A Go program packed and stripped
// the same way must still run everything the runtime needs those kept
// tables for — stack growth, garbage collection with deep stacks,
// goroutines, a recovered panic — and its stack traces still name every
// function, with "?" for the file and 0 for the line. The same program
// packed without stripping gives files and lines: the test tells them
// apart.
func TestStrippedModuleRuns(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		dir := t.TempDir()
		plain := filepath.Join(dir, "plain.wasm")
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", plain, "./testdata/traces")
		build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
		out, err := build.CombinedOutput()
		require.NoError(t, err, "build: %v\n%s", err, out)
		in, err := os.ReadFile(plain)
		require.NoError(t, err)
		packed, err := wasmpack.Pack(in)
		require.NoError(t, err)
		stripped, st, err := wasmpack.StripLines(packed)
		require.NoError(t, err)
		require.GreaterOrEqual(t, st.Funcs, 1000, "stripped too little: %+v", st)
		require.GreaterOrEqual(t, st.ZeroedBytes, 10000, "stripped too little: %+v", st)
		execJS, err := os.ReadFile(filepath.Join(distDir, "wasm_exec.js"))
		require.NoError(t, err)
		modules := map[string][]byte{"/traces/plain.wasm": packed, "/traces/stripped.wasm": stripped}
		e := setupServing(t, k, func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case modules[r.URL.Path] != nil:
					w.Header().Set("Content-Type", "application/wasm")
					_, _ = w.Write(modules[r.URL.Path])
				case r.URL.Path == "/traces/wasm_exec.js":
					w.Header().Set("Content-Type", "text/javascript")
					_, _ = w.Write(execJS)
				case r.URL.Path == "/traces/page.html":
					w.Header().Set("Content-Type", "text/html")
					_, _ = w.Write([]byte(`<!doctype html><script src="wasm_exec.js"></script><script>
const go = new Go();
WebAssembly.instantiateStreaming(fetch(new URLSearchParams(location.search).get("m")), go.importObject)
  .then((r) => go.run(r.instance)).catch((e) => { globalThis.__traces = JSON.stringify({error: String(e)}); });
</script>`))
				default:
					next.ServeHTTP(w, r)
				}
			})
		})
		type result struct {
			Error  string   `json:"error"`
			Total  int      `json:"total"`
			NumGC  int      `json:"numGC"`
			Frames []string `json:"frames"`
			Stack  string   `json:"stack"`
		}
		run := func(module string) result {
			t.Helper()
			tab, err := e.b.Open(e.srv.URL + "/traces/page.html?m=" + module)
			require.NoError(t, err)
			defer tab.Close()
			var res result
			err = harness.Poll(context.Background(), module+" to finish", 30*time.Second, 20*time.Millisecond, func() (bool, error) {
				s, err := harness.Eval[string](tab, `globalThis.__traces ?? ""`)
				if err != nil || s == "" {
					return false, err
				}
				return true, json.Unmarshal([]byte(s), &res)
			})
			require.NoError(t, err)
			require.Equal(t, "", res.Error, "%s", module)
			return res
		}
		const want = 4 * 5000 * 5001 / 2 // four goroutines, each sums 1..5000
		for _, module := range []string{"plain.wasm", "stripped.wasm"} {
			res := run(module)
			require.Equal(t, want, res.Total, "%s computed total %d (want %d) with %d collections", module, res.Total, want, res.NumGC)
			require.GreaterOrEqual(t, res.NumGC, 5, "%s computed total %d (want %d) with %d collections", module, res.Total, want, res.NumGC)
			require.GreaterOrEqual(t, len(res.Frames), 2, "%s: frames %q", module, res.Frames)
			require.True(t, strings.HasPrefix(res.Frames[0], "main.inner "), "%s: frames %q", module, res.Frames)
			require.True(t, strings.HasPrefix(res.Frames[1], "main.main "), "%s: frames %q", module, res.Frames)
			for _, fn := range []string{"panic(", "main.inner.func1(", "main.inner()", "main.main()"} {
				require.Contains(t, res.Stack, fn, "%s: stack trace does not name %s", module, fn)
			}
			if module == "plain.wasm" {
				require.Contains(t, res.Frames[0], "main.go:", "the unstripped module has no lines: %q", res.Frames)
				require.Contains(t, res.Stack, "main.go:", "the unstripped module has no lines: %q", res.Frames)
				continue
			}
			require.Equal(t, "main.inner ?:0", res.Frames[0], "the stripped module still has lines: %q", res.Frames)
			require.NotContains(t, res.Stack, ".go:", "the stripped module still has lines: %q", res.Frames)
			require.Contains(t, res.Stack, "?:0", "the stripped module still has lines: %q", res.Frames)
		}
	})
}
