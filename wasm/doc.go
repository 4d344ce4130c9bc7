// Command wasm is the tabfence runtime that web pages load as tabfence.wasm
// through the ES module loader dist/tabfence.js (jsglue/loader): `make build`
// compiles it with GOOS=js GOARCH=wasm (and, with -tags tabfence_core,
// tabfence-core.wasm, which has no outbox).
//
// On start it builds the API object (newAPI), stores it on globalThis under
// the name the loader passes in the TABFENCE_GLOBAL environment variable
// (default __tabfence_v1), tells the loader it is ready by calling
// globalThis[name + "_ready"](api) when that function exists, and then
// blocks forever: the runtime lives as long as the page.
//
// That object is the raw bridge, not the public API: the loader wraps it so
// synchronous errors are thrown and calls made after the runtime died reject
// instead of hanging (package jsapi has the conventions). Pages use load().
//
// Layout: one file per API area, each a type whose methods are the API's
// methods, installed on the JavaScript object from a method table
// (jsapi.Objects): elect_js.go (election), leader_js.go (a fenced leader
// context and the fenced part of elect), fence_js.go (fence and its epoch
// guard), channel_js.go (chanState), storage_js.go (the page's IndexedDB
// connections), and the outbox in outbox_api_js.go (outboxHandle),
// outbox_open_js.go (its options), outbox_js.go (its enqueue path),
// outbox_schema_js.go and outbox_status_js.go; tf.connection is package
// wasm/connection, registered by connection_js.go and left out (with
// connection_none_js.go instead) by -tags tabfence_core or
// tabfence_noconnection. export_js.go holds the wasm
// export behind the post methods. The argument rules, pure Go and tested
// natively, are in package jsapi; the API's error names and the d.ts check
// (dts_test.go) in errors.go and outbox_errors.go.
//
// Size matters: every byte is downloaded by every user, so this package
// imports no fmt, encoding/json or reflect (strconv is fine).
package main
