//go:build js && wasm

package loader_test

import (
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue/loader"
	"github.com/tabfence/tabfence/jsglue/loader/loadertest"
)

// The exports package main declares, for this package's test binary.

//go:wasmexport tabfence_scratch
func testExportScratch() int32 { return loader.ScratchAddr() }

//go:wasmexport tabfence_scratch_len
func testExportScratchLen() int32 { return loader.XScratchLen }

// core.js, imported as a module: each group gets the core and is found by
// Group; with the exports attached, text JavaScript writes into xscratch
// is what Go reads there (and the view survives memory growth); payload()
// is the payload held during enter; attach(null) detaches the exports and
// tells the groups to drop what they hold.
func TestCoreModule(t *testing.T) {
	ctx := t.Context()
	fast, err := loadertest.NewFastPath(ctx, map[string]string{"probe": `export function hooks(core) {
  let stopped = 0;
  core.onStop(() => stopped++);
  return {
    write(s) { return core.enc.encodeInto(s, core.xscratch()).written; },
    held(f) { return core.enter(f, "the payload"); },
    attached() { return core.exports() !== null; },
    stopped() { return stopped; },
  };
}`})
	require.NoError(t, err)
	defer loadertest.Install(fast)()
	g := loader.Group("probe")
	require.True(t, g.Present())
	require.True(t, loader.Group("nope").Func("write").IsUndefined())
	require.False(t, g.Func("attached").Invoke().Bool(), "exports before attach")

	ex, err := loadertest.Exports()
	require.NoError(t, err)
	fast.Call("attach", ex)
	require.True(t, g.Func("attached").Invoke().Bool())
	n := g.Func("write").Invoke("héllo").Int()
	require.Equal(t, "héllo", loader.ScratchString(n))
	keep := make([]byte, 64<<20) // grows the memory: the view is made again
	keep[len(keep)-1] = 1
	n = g.Func("write").Invoke("after growth").Int()
	require.Equal(t, "after growth", loader.ScratchString(n))

	payload := loader.PayloadFunc()
	var seen js.Value
	cb := js.FuncOf(func(js.Value, []js.Value) any { seen = loader.HeldPayload(payload); return nil })
	defer cb.Release()
	g.Func("held").Invoke(cb)
	require.Equal(t, "the payload", seen.String())
	require.True(t, loader.HeldPayload(payload).IsUndefined(), "a payload held after enter")

	fast.Call("attach", nil)
	require.False(t, g.Func("attached").Invoke().Bool(), "exports after attach(null)")
	require.Equal(t, 1, g.Func("stopped").Invoke().Int())
	_ = keep
}
