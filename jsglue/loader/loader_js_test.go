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
    layout: 1,
    write(s) { return core.enc.encodeInto(s, core.xscratch()).written; },
    held(f) { return core.enter(f, "the payload"); },
    attached() { return core.exports() !== null; },
    stopped() { return stopped; },
  };
}`})
	require.NoError(t, err)
	defer loadertest.Install(fast)()
	g := loader.Group("probe", 1)
	require.True(t, g.Present())
	require.True(t, loader.Group("nope", 1).Func("write").IsUndefined())
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

// A group is found only at the layout its caller speaks: a group of
// another layout, or of none (a hook file older than layouts), is no group,
// and the other groups are still found.
func TestGroupLayout(t *testing.T) {
	fast, err := loadertest.NewFastPath(t.Context(), map[string]string{
		"two":   `export function hooks() { return {layout: 2, f() {}}; }`,
		"text":  `export function hooks() { return {layout: "2", f() {}}; }`,
		"none":  `export function hooks() { return {f() {}}; }`,
		"other": `export function hooks() { return {layout: 7, f() {}}; }`,
	})
	require.NoError(t, err)
	defer loadertest.Install(fast)()
	require.True(t, loader.Group("two", 2).Present())
	require.False(t, loader.Group("two", 2).Func("f").IsUndefined())
	require.False(t, loader.Group("two", 1).Present(), "another layout")
	require.True(t, loader.Group("two", 1).Func("f").IsUndefined(), "a hook of another layout")
	require.False(t, loader.Group("text", 2).Present(), "a layout that is not a number")
	require.False(t, loader.Group("none", 0).Present(), "no layout")
	require.True(t, loader.Group("other", 7).Present())
}
