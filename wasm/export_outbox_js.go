//go:build js && wasm && !tabfence_core

package main

import "github.com/tabfence/tabfence/jsglue/loader"

// exportOutboxAppend builds the plain append the loader wrote into xscratch
// for outbox handle (browser.Runtime.AppendFromScratch), beside the kick bit
// (loader.Leave); 0 sends the loader to Go's enqueue. (Beside export_js.go
// because tabfence-core.wasm has no outbox.)
//
//go:wasmexport tabfence_outbox_append
func exportOutboxAppend(handle, n int32) (v int32) {
	g := loader.Entered()
	defer loader.Recovered(g, &v)
	if o, ok := outboxes.lookup(float64(handle)); ok {
		v = o.rt.AppendFromScratch(int(n))
	}
	return v | loader.Leave(g)
}
