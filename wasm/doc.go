// Command wasm is the tabfence runtime that web pages load as tabfence.wasm
// through the ES module loader dist/tabfence.js (jsglue/loader): `make build`
// compiles it with GOOS=js GOARCH=wasm.
//
// On start it builds the API object, stores it on globalThis under the name
// the loader passes in the TABFENCE_GLOBAL environment variable (default
// __tabfence_v1), tells the loader it is ready by calling
// globalThis[name + "_ready"](api) when that function exists, and then
// blocks forever: the runtime lives as long as the page.
//
// That object is the raw bridge, not the public API: the loader wraps it so
// synchronous errors are thrown and calls made after the runtime died reject
// instead of hanging (jsapi_js.go has the conventions). Pages use load().
//
// Layout: one file per API area (elect_js.go; fence_js.go for fenced
// leadership and fence(); channel_js.go; storage_js.go for the page's
// IndexedDB connections; outbox later), each with a register function
// called from main; the JavaScript plumbing shared by all areas in
// jsapi_js.go; argument validation, which is pure Go and tested natively,
// in args.go and fenceargs.go.
//
// Size matters: every byte is downloaded by every user, so this package
// imports no fmt, encoding/json or reflect (strconv is fine).
package main
