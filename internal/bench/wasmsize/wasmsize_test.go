package wasmsize

import "testing"

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
		if got := pkgOf(sym); got != want {
			t.Errorf("pkgOf(%q) = %q, want %q", sym, got, want)
		}
	}
}

func TestAnalyzeRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("\x00asm"), []byte("not wasm at all"), []byte("\x00asm\x01\x00\x00\x00\x0a\xff")} {
		if _, err := analyze(b); err == nil {
			t.Errorf("analyze(%q): want an error", b)
		}
	}
}
