// Package jsapi is the plumbing of tabfence's JavaScript API, shared by
// every program that hands it to a page or worker (wasm is the one today):
// the conventions between Go's API objects and the loader, method tables
// (Objects) that install an area's methods on its objects, guarded readers
// of what a page passes in, and the API's argument rules (args.go,
// fenceargs.go, outboxargs.go), which are pure Go, tested natively, and
// turn every bad argument into a TypeError, never a panic.
package jsapi
