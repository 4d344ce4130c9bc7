//go:build js && wasm && !tabfence_core && !tabfence_noconnection

package main

import (
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue"
)

// tf.connection refuses bad options with a TypeError rejection (the
// rules are jsapi's, tested natively; this checks the binding reads each
// option from the object the page passes and rejects, never throws).
func TestConnectionRejectsBadOptions(t *testing.T) {
	require.Equal(t, js.TypeFunction, api.Get("connection").Type(), "the full build has tf.connection")
	for _, c := range []struct {
		opts string // a JavaScript expression
		want string
	}{
		{`undefined`, "expects an options object"},
		{`"ws://x"`, "expects an options object"},
		{`({url: "/realtime", replica: {stores: ["issues"]}})`, "scope must be a non-empty string"},
		{`({scope: "s", protocol: 1.5, url: "/realtime", replica: {stores: ["issues"]}})`, "protocol must be an integer"},
		{`({scope: "s", url: 42, replica: {stores: ["issues"]}})`, "url must be a WebSocket URL"},
		{`({scope: "s", url: "/realtime"})`, "replica must be an object"},
		{`({scope: "s", url: "/realtime", replica: {stores: "issues"}})`, "replica.stores must be a non-empty array"},
		{`({scope: "s", url: "/realtime", replica: {stores: ["issues", 7]}})`, "replica.stores[1] must be a non-empty string"},
		{`({scope: "s", url: "/realtime", replica: {stores: {length: 1e9}}})`, "replica.stores must be a non-empty array"},
		{`({scope: "s", url: "/realtime", replica: {stores: new Array(100).fill("x")}})`, "more than 64 stores"},
		{`({scope: "s", url: "/realtime", replica: {stores: ["issues"], version: 0}})`, "replica.version must be an integer"},
		{`({scope: "s", url: () => "/realtime", replica: {stores: ["issues"]}, user: 5})`, "user must be a string"},
		{`({scope: "s", url: "/realtime", replica: {stores: ["issues"]}, pingEveryMs: -1})`, "pingEveryMs must be a positive number"},
		{`({scope: "s", url: "/realtime", replica: {stores: ["issues"]}, pongTimeoutMs: "10"})`, "pongTimeoutMs must be a positive number"},
		{`({scope: "s", url: "/realtime", replica: {stores: ["issues"]}, hiddenNotifyMs: 0})`, "hiddenNotifyMs must be a positive number"},
		{`({scope: "s", url: "/realtime", replica: {stores: ["issues"]}, backoff: {base: 500, cap: 10}})`, "backoff.cap must not be below"},
		{`({scope: "s", url: "/realtime", replica: {stores: ["issues"]}, stallAfterMs: 10})`, "stallAfterMs must be 0 (no watchdog) or from 3000"},
		{`({scope: "s", url: "/realtime", replica: {stores: ["issues"]}, fencePath: ""})`, "fencePath must not be empty"},
	} {
		p := api.Call("connection", eval(c.opts))
		require.True(t, jsglue.InstanceOf(p, js.Global().Get("Promise")), "%s: connection() returns a promise", c.opts)
		_, err := await(t, p)
		wantName(t, err, "TypeError")
		require.ErrorContains(t, err, c.want, c.opts)
	}
}
