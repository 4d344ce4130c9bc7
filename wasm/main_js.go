//go:build js && wasm

package main

import (
	"syscall"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

// apiVersion is the version of the JavaScript API this runtime implements;
// it is part of the default global name so two incompatible runtimes in one
// page never overwrite each other.
const apiVersion = "1"

func main() {
	jsglue.PanicHandler = reportPanic
	api := newAPI()
	name := globalName()
	g := js.Global()
	g.Set(name, api)
	if ready := g.Get(name + "_ready"); ready.Type() == js.TypeFunction {
		ready.Invoke(api)
	}
	go warmUp()
	select {}
}

// apiFuncs are the functions of the API object; the objects they return
// have their own method tables (objects).
var apiFuncs = [...]apiFunc{
	{"elect", syncCall, elect},
	{"lockName", syncCall, lockName},
	{"outbox", asyncCall, openOutbox},
	{"fence", syncCall, fenceFn},
	{"deleteDatabase", asyncCall, deleteDatabase},
	{"channel", syncCall, channelFn},
}

// newAPI builds the API object main hands the loader.
func newAPI() js.Value {
	api := newObject()
	api.Set("version", apiVersion)
	for _, f := range apiFuncs {
		api.Set(f.name, f.call.export(f.fn).Value)
	}
	return api
}

// globalName is where the API object goes: the loader picks it so that a
// page can, if it ever must, run two runtimes side by side.
func globalName() string {
	if n, ok := syscall.Getenv("TABFENCE_GLOBAL"); ok && n != "" {
		return n
	}
	return "__tabfence_v" + apiVersion
}

// reportPanic logs a panic recovered in a callback: the call returns
// undefined (or its promise rejects) and the runtime carries on, so the
// message is the only trace of the bug.
func reportPanic(r any) {
	js.Global().Get("console").Call("error", "tabfence: recovered panic in a callback:", panicString(r))
}

func panicString(r any) string {
	switch v := r.(type) {
	case string:
		return v
	case error:
		return v.Error()
	}
	return "non-error panic value"
}
