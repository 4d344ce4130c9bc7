//go:build e2e

package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.wasm")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", plain, "./testdata/traces")
	build.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	in, err := os.ReadFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	packed, err := wasmpack.Pack(in)
	if err != nil {
		t.Fatal(err)
	}
	stripped, st, err := wasmpack.StripLines(packed)
	if err != nil {
		t.Fatal(err)
	}
	if st.Funcs < 1000 || st.ZeroedBytes < 10000 {
		t.Fatalf("stripped too little: %+v", st)
	}
	execJS, err := os.ReadFile(filepath.Join(distDir, "wasm_exec.js"))
	if err != nil {
		t.Fatal(err)
	}
	modules := map[string][]byte{"/traces/plain.wasm": packed, "/traces/stripped.wasm": stripped}
	e := setupServing(t, func(next http.Handler) http.Handler {
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
		if err != nil {
			t.Fatal(err)
		}
		defer tab.Close()
		var res result
		err = harness.Poll(tab.Ctx(), module+" to finish", 30*time.Second, 20*time.Millisecond, func() (bool, error) {
			s, err := harness.Eval[string](tab, `globalThis.__traces ?? ""`)
			if err != nil || s == "" {
				return false, err
			}
			return true, json.Unmarshal([]byte(s), &res)
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Error != "" {
			t.Fatalf("%s: %s", module, res.Error)
		}
		return res
	}
	const want = 4 * 5000 * 5001 / 2 // four goroutines, each sums 1..5000
	for _, module := range []string{"plain.wasm", "stripped.wasm"} {
		res := run(module)
		if res.Total != want || res.NumGC < 5 {
			t.Fatalf("%s computed total %d (want %d) with %d collections", module, res.Total, want, res.NumGC)
		}
		if len(res.Frames) < 2 || !strings.HasPrefix(res.Frames[0], "main.inner ") || !strings.HasPrefix(res.Frames[1], "main.main ") {
			t.Fatalf("%s: frames %q", module, res.Frames)
		}
		for _, fn := range []string{"panic(", "main.inner.func1(", "main.inner()", "main.main()"} {
			if !strings.Contains(res.Stack, fn) {
				t.Fatalf("%s: stack trace does not name %s:\n%s", module, fn, res.Stack)
			}
		}
		if module == "plain.wasm" {
			if !strings.Contains(res.Frames[0], "main.go:") || !strings.Contains(res.Stack, "main.go:") {
				t.Fatalf("the unstripped module has no lines: %q\n%s", res.Frames, res.Stack)
			}
			continue
		}
		if res.Frames[0] != "main.inner ?:0" || strings.Contains(res.Stack, ".go:") || !strings.Contains(res.Stack, "?:0") {
			t.Fatalf("the stripped module still has lines: %q\n%s", res.Frames, res.Stack)
		}
	}
}
