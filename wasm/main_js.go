//go:build js && wasm

package main

import (
	"syscall"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// apiVersion is the version of the JavaScript API this runtime implements;
// it is part of the default global name so two incompatible runtimes in one
// page never overwrite each other.
const apiVersion = "1"

func main() {
	jsglue.PanicHandler = jsapi.ReportPanic
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

// apiFuncs are the functions of the API object (with connectionFuncs,
// which a build without the connection leaves empty); the objects they
// return have their own method tables (objects).
var apiFuncs = [...]jsapi.Func{
	{Name: "elect", Call: jsapi.Sync, Fn: elect},
	{Name: "lockName", Call: jsapi.Sync, Fn: lockName},
	{Name: "outbox", Call: jsapi.Async, Fn: openOutbox},
	{Name: "backgroundSync", Call: jsapi.Async, Fn: openSyncOutbox},
	{Name: "fence", Call: jsapi.Sync, Fn: fenceFn},
	{Name: "deleteDatabase", Call: jsapi.Async, Fn: deleteDatabase},
	{Name: "channel", Call: jsapi.Sync, Fn: channelFn},
}

// newAPI builds the API object main hands the loader.
func newAPI() js.Value {
	api := jsapi.NewObject()
	api.Set("version", apiVersion)
	for _, fs := range [][]jsapi.Func{apiFuncs[:], connectionFuncs} {
		for _, f := range fs {
			api.Set(f.Name, f.Call.Export(f.Fn).Value)
		}
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

// reportPanic is jsapi.ReportPanic (export_js.go's name).
func reportPanic(r any) { jsapi.ReportPanic(r) }
