//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// npmDir is the package `make build` writes.
var npmDir = filepath.Join(distDir, "npm")

// The bundlers the throwaway app installs from npm.
const (
	esbuildVersion = "0.28.2"
	viteVersion    = "8.3.8"
)

// npmApp packs dist/npm with npm pack, installs the tarball and extra
// packages into a throwaway app under a temp dir (npm's cache first: the
// test runs offline once the packages were fetched), copies the test app's
// sources (testdata/npmapp) in, and returns its directory.
func npmApp(t *testing.T, extra ...string) string {
	t.Helper()
	_, err := os.Stat(filepath.Join(npmDir, "package.json"))
	require.NoError(t, err, "run `make build` first")
	_, err = exec.LookPath("npm")
	require.NoError(t, err, "npm is needed (make deps installs it)")
	dir := t.TempDir()
	abs, err := filepath.Abs(npmDir)
	require.NoError(t, err)
	out := run(t, dir, "npm", "pack", "--silent", "--pack-destination", dir, abs)
	tarball := strings.TrimSpace(out[strings.LastIndexByte(strings.TrimSpace(out), '\n')+1:])
	require.True(t, strings.HasSuffix(tarball, ".tgz"), "npm pack said %q", out)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private": true, "type": "module"}`), 0o644))
	args := append([]string{"install", "--prefer-offline", "--no-audit", "--no-fund", "--save-exact", "./" + tarball}, extra...)
	run(t, dir, "npm", args...)
	src := filepath.Join("testdata", "npmapp")
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644))
	}
	return dir
}

// run runs a command in dir and returns its output, failing the test with
// that output when it fails.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &out
	require.NoError(t, cmd.Run(), "%s %s:\n%s", name, strings.Join(args, " "), out.String())
	return out.String()
}

// serveApp mounts the app's files at /app/ and the installed package, as
// npm left it, at /pkg/, in front of the demo server.
func serveApp(app string) func(http.Handler) http.Handler {
	files := http.StripPrefix("/app/", http.FileServer(http.Dir(app)))
	pkg := http.StripPrefix("/pkg/", http.FileServer(http.Dir(filepath.Join(app, "node_modules", "tabfence"))))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case strings.HasPrefix(r.URL.Path, "/app/"):
				files.ServeHTTP(w, r)
			case strings.HasPrefix(r.URL.Path, "/pkg/"):
				if strings.HasSuffix(r.URL.Path, ".wasm") {
					w.Header().Set("Content-Type", "application/wasm")
				}
				pkg.ServeHTTP(w, r)
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
}

// appTimeout bounds one app's run: load, election, an outbox and one
// delivery, on a shared machine. The wait ends when the app settles.
const appTimeout = 60 * time.Second

// appResult opens page and waits for its window.appResult to settle: the
// lock name of its election and the notes the server holds for its user,
// or the error it failed with.
func appResult(t *testing.T, e *env, page string) map[string]string {
	t.Helper()
	tab, err := e.b.Open(e.srv.URL + page)
	require.NoError(t, err)
	t.Cleanup(tab.Close)
	var got map[string]string
	require.NoError(t, harness.Poll(t.Context(), page+" settled", appTimeout, 50*time.Millisecond, func() (bool, error) {
		got, err = harness.Eval[map[string]string](tab, `(() => {
			if (window.appResult && !window.appSettled) {
				window.appSettled = {};
				window.appResult.then((v) => (window.appOut = v), (err) => (window.appOut = { error: String(err) }));
			}
			return window.appOut ?? null;
		})()`)
		return got != nil, err
	}), "%s", page)
	return got
}

// The package as a user installs it: npm pack's tarball in a fresh app,
// bundled by esbuild (the module imported as tabfence/wasm, wasm_exec.js
// and the hook modules inlined into the bundle), by Vite (load() without
// options: Vite emits the module the loader names), and unbundled (load()
// finding its files beside the loader). Each elects and gets one note
// through the outbox to the demo server, in each browser.
func TestNpmPackageBundled(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		app := npmApp(t, "esbuild@"+esbuildVersion, "vite@"+viteVersion)
		run(t, app, filepath.Join("node_modules", ".bin", "esbuild"), "app.js", "--bundle", "--format=esm",
			"--outdir=out", "--loader:.wasm=file", "--public-path=/app/out/", "--log-level=warning")
		require.NoError(t, os.WriteFile(filepath.Join(app, "out", "index.html"),
			[]byte(`<!doctype html><script type="module" src="app.js"></script>`), 0o644))
		run(t, app, filepath.Join("node_modules", ".bin", "vite"), "build", "--base", "/app/vite/", "--outDir", "vite",
			"--logLevel", "warn")

		e := setupServing(t, k, serveApp(app))
		for _, page := range []string{"/app/out/index.html", "/app/vite/vite.html", "/app/unbundled.html"} {
			got := appResult(t, e, page)
			require.Empty(t, got["error"], page)
			require.True(t, strings.HasPrefix(got["lockName"], "tabfence:npm-"), "%s: %v", page, got)
			require.Equal(t, "n1:from the bundle", got["notes"], "%s: %v", page, got)
		}
	})
}

// The package's worker entry as a user bundles it: "tabfence/sw" bundled
// by esbuild into one module Service Worker, which Chromium installs and
// which drains its queue on the queue's sync tag (no session here: the
// report says so, without a retry).
func TestNpmWorkerBundled(t *testing.T) {
	chromiumOnly(t, "dispatches sync to the bundled Service Worker and evaluates in it (CDP ServiceWorker domain)", func(t *testing.T, k harness.Kind) {
		app := npmApp(t, "esbuild@"+esbuildVersion)
		run(t, app, filepath.Join("node_modules", ".bin", "esbuild"), "worker.js", "--bundle", "--format=esm",
			"--outdir=out", "--loader:.wasm=file", "--public-path=/app/out/", "--log-level=warning")
		e := setupServing(t, k, serveApp(app))
		sws, err := e.b.ServiceWorkers()
		require.NoError(t, err)
		tab := e.open("raw-locks.html", scope(t), 1, "waiting")
		eval[bool](t, tab, `navigator.serviceWorker.register("/app/out/worker.js", {type: "module"}).then(() => true)`)
		sc := e.srv.URL + "/app/out/"
		_, err = sws.WaitActive(context.Background(), sc, func(string) bool { return true })
		require.NoError(t, err, "worker errors: %v", sws.Errors())
		w, err := sws.Attach(context.Background(), sc)
		require.NoError(t, err)
		defer w.Close()
		require.NoError(t, sws.DispatchSync(context.Background(), sc, "tabfence:outbox-npm-worker:v1", false))
		var reps []harness.SyncReport
		require.NoError(t, harness.Poll(t.Context(), "the report", appTimeout, 50*time.Millisecond, func() (bool, error) {
			reps, err = w.SyncReports()
			return len(reps) > 0, err
		}), "worker errors: %v", sws.Errors())
		require.Equal(t, "no-session", reps[0].Reason, "%+v", reps)
		require.False(t, reps[0].Retry)
	})
}
