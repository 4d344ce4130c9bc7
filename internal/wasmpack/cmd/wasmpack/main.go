// Command wasmpack repacks the data section of Go-built wasm modules in
// place, so that they compress better (see package wasmpack). `make build`
// runs it on everything in dist/, and the wasm test runner on every test
// binary, so the tests run what ships.
//
//	go run ./internal/wasmpack/cmd/wasmpack file.wasm...
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/tabfence/tabfence/internal/wasmpack"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: wasmpack file.wasm...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := pack(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func pack(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := wasmpack.Pack(in)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// Check what the package promises before replacing the file: the same
	// initial memory.
	before, err := wasmpack.Memory(in)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	after, err := wasmpack.Memory(out)
	if err != nil {
		return fmt.Errorf("%s: repacked module: %w", path, err)
	}
	if !bytes.Equal(before, after) {
		return fmt.Errorf("%s: repacking changed the initial memory; file left as it was", path)
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp := path + ".wasmpack"
	if err := os.WriteFile(tmp, out, st.Mode().Perm()); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
