//go:build js && wasm && (tabfence_core || tabfence_noconnection)

package main

import "github.com/tabfence/tabfence/wasm/jsapi"

// Built without the realtime connection (tabfence-core.wasm, or
// -tags tabfence_noconnection, which the bench builds to measure the
// connection's bytes): the API has no tf.connection at all.
var connectionFuncs []jsapi.Func
