//go:build js && wasm

package idb

import (
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/jsglue/loader"
	"github.com/tabfence/tabfence/jsglue/loader/loadertest"
)

// The exports package main declares (wasm/export_js.go), declared again
// for this package's test binary: the tests run Apply through the loader's
// idb hooks (fast.js, the shipped module) and this export, as pages do.

//go:wasmexport tabfence_scratch
func testExportScratch() int32 { return loader.ScratchAddr() }

//go:wasmexport tabfence_scratch_len
func testExportScratchLen() int32 { return loader.XScratchLen }

//go:wasmexport tabfence_idb_fence
func testExportFence(id, n int32) (v int32) {
	g := loader.Entered()
	defer loader.Recovered(g, &v)
	v = JudgeFenceExported(id, n) << 1
	return v | loader.Leave(g)
}

//go:wasmexport tabfence_idb_alloc
func testExportAlloc(id, n int32) (v int32) {
	g := loader.Entered()
	defer loader.Recovered(g, &v)
	v = AllocExported(id, n) << 1
	return v | loader.Leave(g)
}

// withHooks installs the loader's fast path with the idb hooks and this
// instance's exports attached, for the databases opened until t ends.
func withHooks(t *testing.T) {
	t.Helper()
	fast, err := loadertest.NewFastPath(t.Context(), map[string]string{loader.GroupIDB: LoaderJS})
	require.NoError(t, err)
	uninstall := loadertest.Install(fast)
	ex, err := loadertest.Exports()
	require.NoError(t, err)
	require.Equal(t, js.TypeFunction, ex.Get("tabfence_idb_fence").Type())
	require.Equal(t, js.TypeFunction, ex.Get("tabfence_idb_alloc").Type())
	fast.Call("attach", ex)
	t.Cleanup(func() {
		fast.Call("attach", nil)
		uninstall()
	})
	require.Equal(t, js.TypeFunction, loader.Group(loader.GroupIDB, loaderLayout).Func("applier").Type())
}

// fast.js's layout is the one this package speaks (a drift would silently
// turn the loader's fencing hooks off).
func TestLoaderLayout(t *testing.T) {
	loadertest.RequireLayout(t, loader.GroupIDB, LoaderJS, loaderLayout)
}
