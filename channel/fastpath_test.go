//go:build js && wasm

package channel

import (
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/jsglue/loader"
	"github.com/tabfence/tabfence/jsglue/loader/loadertest"
)

// The exports package main declares (wasm/export_js.go), declared again
// for this package's test binary, which has no package main of ours: the
// tests run the channel through the loader's hooks and exports as pages do.

//go:wasmexport tabfence_scratch
func testExportScratch() int32 { return loader.ScratchAddr() }

//go:wasmexport tabfence_scratch_len
func testExportScratchLen() int32 { return loader.XScratchLen }

//go:wasmexport tabfence_channel_rx2
func testExportRx(id, n int32) int32 { return ReceiveExported(id, n) }

// withFastPath installs the loader's fast path with the channel's hooks
// (fast.js, imported as a module) for the channels opened until t ends, as
// a page that uses the loader has it, and returns it.
func withFastPath(t *testing.T) js.Value {
	t.Helper()
	fast, err := loadertest.NewFastPath(t.Context(), map[string]string{loader.GroupChannel: LoaderJS})
	require.NoError(t, err)
	t.Cleanup(loadertest.Install(fast))
	h := loader.Group(loader.GroupChannel, loaderLayout)
	for _, f := range []string{"rx", "post", "post2", "deliver", "deliverHeld"} {
		require.False(t, h.Func(f).IsUndefined(), "no hook %s", f)
	}
	return fast
}

// withExports installs the loader's fast path (withFastPath) and attaches
// this instance's wasm exports to it, as the loader does: received headers
// enter Go through tabfence_channel_rx2.
func withExports(t *testing.T) {
	t.Helper()
	fast := withFastPath(t)
	ex, err := loadertest.Exports()
	require.NoError(t, err)
	require.Equal(t, js.TypeFunction, ex.Get("tabfence_channel_rx2").Type())
	fast.Call("attach", ex)
	t.Cleanup(func() { fast.Call("attach", nil) })
}

// fast.js's layout is the one this package speaks (a drift would silently
// turn the loader's channel hooks off).
func TestLoaderLayout(t *testing.T) {
	loadertest.RequireLayout(t, loader.GroupChannel, LoaderJS, loaderLayout)
}
