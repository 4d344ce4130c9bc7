//go:build js && wasm && !tabfence_core

package main

import (
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue/loader"
	"github.com/tabfence/tabfence/jsglue/loader/loadertest"
)

// api.js's layout is the one this package speaks (a drift would silently
// turn the loader's post hooks off).
func TestLoaderLayout(t *testing.T) {
	loadertest.RequireLayout(t, loader.GroupAPI, apiJS, apiLayout)
}

// The loader's groups are separate files, and a cache may mix two builds'
// (an older tabfence-outbox.js beside a newer runtime): a group of another
// layout than its package speaks is ignored (never called; an outbox
// opened beside it takes Go's own path, and works) while the other groups
// are still used.
func TestGroupOfAnotherLayoutIgnored(t *testing.T) {
	spy := eval(`((fast) => {
  const spy = {stale: [], channel: 0, api: 0};
  const outbox = {layout: fast.outbox.layout + 1};
  for (const [n, f] of Object.entries(fast.outbox)) {
    if (typeof f === "function") outbox[n] = () => { spy.stale.push(n); throw new Error("hook of another layout called: " + n); };
  }
  const counted = (group, k) => Object.fromEntries(Object.entries(group).map(([n, f]) =>
    [n, typeof f === "function" ? (...a) => (spy[k]++, f(...a)) : f]));
  spy.fast = {...fast, outbox, channel: counted(fast.channel, "channel"), api: counted(fast.api, "api")};
  return spy;
})`).Invoke(loaderFastPath(t))
	t.Cleanup(loadertest.Install(spy.Get("fast")))

	eval(obMock)
	ob := openOb(t, nil)
	mustAwait(t, ob.Call("pause"))
	res := mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "a", payload: "{}"})`)))
	require.Equal(t, "appended", res.Get("action").String())
	waitStatus(t, ob, "1 pending", func(s js.Value) bool { return s.Get("pending").Int() == 1 })
	require.True(t, loaderOpFields.IsUndefined(), "the runtime took the outbox group of another layout")
	require.Equal(t, 0, spy.Get("stale").Length(), "hooks of another layout called: %v", spy.Get("stale"))

	ch := api.Get("channel").Invoke("layout-mix")
	require.Equal(t, js.TypeFunction, ch.Get("post").Type(), "channel: %v", ch)
	t.Cleanup(func() { ch.Call("close") })
	require.Positive(t, spy.Get("channel").Int(), "the channel group was not used")
	require.Positive(t, spy.Get("api").Int(), "the api group was not used")
}
