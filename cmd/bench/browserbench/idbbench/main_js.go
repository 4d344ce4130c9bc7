//go:build js && wasm

// Command idbbench is a wasm program the browser bench builds and loads
// beside the runtime: it exposes benchAllocate and benchApply (the idb
// layer's Go-versus-raw-JavaScript comparison, on one connection)
// as globalThis.__tabfenceIDBBench(kind, n) -> Promise<{go, raw, ratios}>
// (harness.Rates' JSON). It is not
// part of tabfence.wasm, so the bench code costs users nothing.
package main

import (
	"context"
	"errors"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

func main() {
	cb := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
		return jsglue.Async(func() (any, error) {
			if len(args) < 2 || args[0].Type() != js.TypeString || args[1].Type() != js.TypeNumber {
				return nil, errors.New("idbbench: (kind, n)")
			}
			run := benchAllocate
			if args[0].String() == "apply" {
				run = benchApply
			}
			r, err := run(context.Background(), args[1].Int())
			if err != nil {
				return nil, err
			}
			ratios := make([]any, len(r.Ratios))
			for i, x := range r.Ratios {
				ratios[i] = x
			}
			return map[string]any{"go": r.GoPerSec, "raw": r.JSPerSec, "ratios": ratios}, nil
		})
	})
	js.Global().Set("__tabfenceIDBBench", cb.Value)
	if ready := js.Global().Get("__tabfenceIDBBenchReady"); ready.Type() == js.TypeFunction {
		ready.Invoke()
	}
	select {}
}
