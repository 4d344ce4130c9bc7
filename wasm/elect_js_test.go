//go:build js && wasm

package main

import (
	"context"
	"syscall/js"
	"testing"
	"time"

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
	if !v.InstanceOf(js.Global().Get("Error")) || v.Get("name").String() != "TypeError" {
		t.Fatalf("got %v", v)
	}
	if !jsapi.JSReflect.Call("get", v, jsapi.SymThrow).Truthy() {
		t.Fatal("returned error is not marked to be thrown")
	}
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
		if e.InstanceOf(js.Global().Get("Error")) {
			t.Fatalf("elect: %v", e.Get("message"))
		}
		return e
	}
	has := func(s string) func() bool {
		return func() bool { return events.Call("includes", s).Bool() }
	}
	a := mk("a")
	waitFor(t, "a leads", has("a:leader:1"))
	b := mk("b")
	waitFor(t, "b follows", has("b:follower"))
	if !a.Get("isLeader").Bool() || b.Get("isLeader").Bool() {
		t.Fatal("isLeader getters disagree with the events")
	}
	if a.Get("lockName").String() != "tabfence:wasm-test:v1" {
		t.Fatalf("lockName %v", a.Get("lockName"))
	}
	lead := a.Get("leadership")
	if lead.IsNull() || lead.Get("generation").Int() != 1 || lead.Get("signal").Get("aborted").Bool() {
		t.Fatalf("leadership %v", lead)
	}

	if _, err := jsglue.Await(context.Background(), a.Call("close")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b leads", has("b:leader:1"))
	for _, want := range []string{"a:abort:InvalidStateError", "a:lost:closed:LostLeadershipError"} {
		if !has(want)() {
			t.Errorf("missing event %s in %v", want, js.Global().Get("JSON").Call("stringify", events))
		}
	}
	if !lead.Get("signal").Get("aborted").Bool() || !a.Get("leadership").IsNull() {
		t.Fatal("closed leader's context still live")
	}
	if _, err := jsglue.Await(context.Background(), a.Call("resign")); err == nil || jsglue.NameOf(err) != "InvalidStateError" {
		t.Fatalf("resign after close: %v", err)
	}
	if _, err := jsglue.Await(context.Background(), b.Call("close")); err != nil {
		t.Fatal(err)
	}
	// Per-election methods are bound shared callbacks: nothing is left behind.
	if got := jsglue.LiveCallbacks(); got != base {
		t.Errorf("live callbacks %d, want %d", got, base)
	}
}
