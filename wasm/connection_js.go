//go:build js && wasm && !tabfence_core && !tabfence_noconnection

package main

import (
	"github.com/tabfence/tabfence/wasm/connection"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// connectionFuncs are the API functions of this build beside apiFuncs
// (newAPI): tf.connection (package connection). A build with -tags
// tabfence_noconnection has none (connection_none_js.go), so the bench can
// measure the connection's bytes.
var connectionFuncs = []jsapi.Func{
	{Name: "connection", Call: jsapi.Async, Fn: connection.Open},
}
