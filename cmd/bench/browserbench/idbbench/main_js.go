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

	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/jsglue/loader"
	"github.com/tabfence/tabfence/jsglue/loader/loadertest"
)

// The exports of the runtime's idb hooks (wasm/export_js.go), declared for
// this program too: it installs the loader's fast path with the idb hooks
// (useHooks), so the idb layer is timed as a page that uses the loader
// runs it.

//go:wasmexport tabfence_scratch
func exportScratch() int32 { return loader.ScratchAddr() }

//go:wasmexport tabfence_scratch_len
func exportScratchLen() int32 { return loader.XScratchLen }

//go:wasmexport tabfence_idb_fence
func exportFence(id, n int32) (v int32) {
	g := loader.Entered()
	defer loader.Recovered(g, &v)
	v = idb.JudgeFenceExported(id, n) << 1
	return v | loader.Leave(g)
}

//go:wasmexport tabfence_idb_alloc
func exportAlloc(id, n int32) (v int32) {
	g := loader.Entered()
	defer loader.Recovered(g, &v)
	v = idb.AllocExported(id, n) << 1
	return v | loader.Leave(g)
}

// useHooks installs the loader's fast path with the idb hooks (fast.js)
// and attaches this instance's exports, before any database is opened.
func useHooks(ctx context.Context) error {
	fast, err := loadertest.NewFastPath(ctx, map[string]string{loader.GroupIDB: idb.LoaderJS})
	if err != nil {
		return err
	}
	loadertest.Install(fast)
	ex, err := loadertest.Exports()
	if err != nil {
		return err
	}
	fast.Call("attach", ex)
	return nil
}

func main() {
	hooks := make(chan error, 1)
	go func() { hooks <- useHooks(context.Background()) }()
	cb := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
		return jsglue.Async(func() (any, error) {
			if len(args) < 2 || args[0].Type() != js.TypeString || args[1].Type() != js.TypeNumber {
				return nil, errors.New("idbbench: (kind, n)")
			}
			if err := <-hooks; err != nil {
				hooks <- err
				return nil, err
			}
			hooks <- nil
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
