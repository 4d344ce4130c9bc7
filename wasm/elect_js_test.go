//go:build js && wasm

package main

import (
	"context"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// These run in Chromium through wasmbrowsertest (make test-wasm). Two
// elections in one page contend exactly like two tabs, so the JavaScript
// objects elect() returns are exercised here without a second tab; the
// multi-tab behaviour is covered by e2e/.

var api = newAPI()

func eval(src string) js.Value { return js.Global().Call("eval", src) }

func TestElectThrowsMarkedTypeError(t *testing.T) {
	v := api.Get("elect").Invoke(map[string]any{"scope": "x", "protocol": "2"})
	require.True(t, v.InstanceOf(js.Global().Get("Error")), "got %v", v)
	require.Equal(t, "TypeError", v.Get("name").String())
	require.True(t, jsapi.JSReflect.Call("get", v, jsapi.SymThrow).Truthy(), "returned error is not marked to be thrown")
}

// waitFor polls a JavaScript condition; the callbacks run in microtasks, so
// the test goroutine must yield to JavaScript in between.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTwoElectionsInOnePageHandOver(t *testing.T) {
	base := jsglue.LiveCallbacks()
	events := js.Global().Get("Array").New()
	js.Global().Set("__events", events)
	mk := func(tag string) js.Value {
		opts := eval(`(tag) => ({ scope: "wasm-test", protocol: 1,
			onLeader(ctx) { __events.push(tag + ":leader:" + ctx.generation); ctx.signal.onabort = () => __events.push(tag + ":abort:" + ctx.signal.reason.name); },
			onFollower() { __events.push(tag + ":follower"); },
			onLost(reason, err) { __events.push(tag + ":lost:" + reason + ":" + err.name); } })`).Invoke(tag)
		e := api.Get("elect").Invoke(opts)
		require.False(t, e.InstanceOf(js.Global().Get("Error")), "elect: %v", e.Get("message"))
		return e
	}
	has := func(s string) func() bool {
		return func() bool { return events.Call("includes", s).Bool() }
	}
	a := mk("a")
	waitFor(t, "a leads", has("a:leader:1"))
	b := mk("b")
	waitFor(t, "b follows", has("b:follower"))
	require.True(t, a.Get("isLeader").Bool(), "isLeader getters disagree with the events")
	require.False(t, b.Get("isLeader").Bool(), "isLeader getters disagree with the events")
	require.Equal(t, "tabfence:wasm-test:v1", a.Get("lockName").String())
	lead := a.Get("leadership")
	require.False(t, lead.IsNull(), "leadership")
	require.Equal(t, 1, lead.Get("generation").Int())
	require.False(t, lead.Get("signal").Get("aborted").Bool())

	_, err := jsglue.Await(context.Background(), a.Call("close"))
	require.NoError(t, err)
	waitFor(t, "b leads", has("b:leader:1"))
	for _, want := range []string{"a:abort:InvalidStateError", "a:lost:closed:LostLeadershipError"} {
		assert.True(t, has(want)(), "missing event %s in %v", want, js.Global().Get("JSON").Call("stringify", events))
	}
	require.True(t, lead.Get("signal").Get("aborted").Bool(), "closed leader's context still live")
	require.True(t, a.Get("leadership").IsNull(), "closed leader's context still live")
	require.False(t, a.Get("isLeader").Bool(), "a closed election leads nothing")
	_, err = jsglue.Await(context.Background(), a.Call("resign"))
	require.Error(t, err, "resign after close")
	require.Equal(t, "InvalidStateError", jsglue.NameOf(err), "resign after close")
	_, err = jsglue.Await(context.Background(), a.Call("close"))
	require.NoError(t, err, "closing twice is fine")
	_, err = jsglue.Await(context.Background(), b.Call("close"))
	require.NoError(t, err)
	// Per-election methods are bound shared callbacks: nothing is left behind.
	assert.Equal(t, base, jsglue.LiveCallbacks(), "live callbacks")
}
