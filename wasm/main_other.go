//go:build !(js && wasm)

package main

import "os"

// main of the native build: the runtime only runs in a browser. This file
// exists so `go vet ./...` and the native tests of the pure parts (argument
// validation) build.
func main() {
	os.Stderr.WriteString("tabfence runs in a browser: build it with `make build` and load dist/tabfence.js\n")
	os.Exit(2)
}
