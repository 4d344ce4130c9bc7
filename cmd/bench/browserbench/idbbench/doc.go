//go:build !(js && wasm)

// Command idbbench exposes the idb layer's benchmarks to the browser bench
// (see main_js.go); it does something only when built for GOOS=js GOARCH=wasm.
package main

func main() {}
