// Command wasmpack repacks the data and code sections of Go-built wasm
// modules in place, so that they compress better (see package wasmpack). `make build`
// runs it on everything in dist/, and the wasm test runner on every test
// binary, so the tests run what ships.
//
// With -strip-lines it also drops the file and line tables of Go's pclntab
// (wasmpack.StripLines): tens of KB of brotli download, at the price
// of "?:0" for the file and line of every frame of a panic's stack trace
// (the functions are still named). `make build` strips what it ships; the
// test binaries keep their lines, which test failures print.
//
//	go run ./cmd/wasmpack [-strip-lines] file.wasm...
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/tabfence/tabfence/internal/wasmpack"
)

var stripLines = flag.Bool("strip-lines", false, "drop the file and line tables of Go's pclntab")

func main() {
	flag.Parse()
	if flag.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "usage: wasmpack [-strip-lines] file.wasm...")
		os.Exit(2)
	}
	for _, path := range flag.Args() {
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
	if err := sameMemory(wasmpack.Memory, in, out); err != nil {
		return fmt.Errorf("%s: repacking: %w", path, err)
	}
	if *stripLines {
		packed := out
		if out, _, err = wasmpack.StripLines(packed); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		// The memory the package says, nothing else.
		if err := sameMemory(wasmpack.StrippedMemory, packed, out); err != nil {
			return fmt.Errorf("%s: stripping: %w", path, err)
		}
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

// sameMemory checks that module out starts with the memory want computes
// from module in.
func sameMemory(want func([]byte) ([]byte, error), in, out []byte) error {
	w, err := want(in)
	if err != nil {
		return err
	}
	got, err := wasmpack.Memory(out)
	if err != nil {
		return fmt.Errorf("the new module: %w", err)
	}
	if !bytes.Equal(w, got) {
		return errors.New("the initial memory is not the one promised; file left as it was")
	}
	return nil
}
