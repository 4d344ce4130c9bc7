// Package wasmtest runs a package's wasm tests in Chromium from a native
// test, against a server the native test started: the browser cannot host
// one, and wasmbrowsertest passes the environment through, so the server's
// URL reaches the wasm tests as TABFENCE_TEST_SERVER.
package wasmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Run builds and runs the wasm tests of the package in the current
// directory that match run, with TABFENCE_TEST_SERVER=serverURL, and
// returns their verbose output; it fails t when they fail. It skips with
// -short and without go_js_wasm_exec (wasmbrowsertest, make wasmexec) on
// PATH.
func Run(t *testing.T, serverURL, run string) []byte {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the wasm tests in Chromium")
	}
	if _, err := exec.LookPath("go_js_wasm_exec"); err != nil {
		t.Skip("go_js_wasm_exec (wasmbrowsertest) not on PATH")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(goBin, "test", "-count=1", "-v", "-run", run, ".")
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm", "TABFENCE_TEST_SERVER="+serverURL)
	out, err := cmd.CombinedOutput()
	if testing.Verbose() {
		t.Logf("%s", out)
	}
	if err != nil {
		t.Fatalf("wasm tests failed: %v\n%s", err, out)
	}
	return out
}
