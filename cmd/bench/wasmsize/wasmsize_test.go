package wasmsize

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPkgOf(t *testing.T) {
	for sym, want := range map[string]string{
		"github.com_tabfence_tabfence_idb.(*Tx).Await":       "github.com/tabfence/tabfence/idb",
		"github.com_tabfence_tabfence_idb.init.0.onTx.func3": "github.com/tabfence/tabfence/idb",
		"runtime.gcStart":                     "runtime",
		"runtime.__gcCPULimiterState_.update": "runtime",
		"strconv.FormatInt":                   "strconv",
		"syscall_js.Value.Get":                "syscall/js",
		"internal_runtime_maps.(*Map).get":    "internal/runtime/maps",
		"":                                    "(unnamed)",
		"noDotHere":                           "noDotHere",
	} {
		assert.Equal(t, want, pkgOf(sym), "pkgOf(%q)", sym)
	}
}

func TestAnalyzeRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("\x00asm"), []byte("not wasm at all"), []byte("\x00asm\x01\x00\x00\x00\x0a\xff")} {
		_, err := analyze(b)
		assert.Error(t, err, "analyze(%q): want an error", b)
	}
}

// TestAnalyzeEnv prints the largest functions of the wasm file named by
// WASMSIZE_FILE (skipped without it): a quick way to see which functions
// a change added, e.g. WASMSIZE_PREFIX=time.
func TestAnalyzeEnv(t *testing.T) {
	path := os.Getenv("WASMSIZE_FILE")
	if path == "" {
		t.Skip("WASMSIZE_FILE not set")
	}
	rep, err := Analyze(path)
	require.NoError(t, err)
	n, _ := strconv.Atoi(os.Getenv("WASMSIZE_N"))
	if n == 0 {
		n = 40
	}
	var b strings.Builder
	rep.Print(&b, 20)
	rep.PrintFuncs(&b, n, os.Getenv("WASMSIZE_PREFIX"))
	t.Log("\n" + b.String())
}
