//go:build js && wasm

// Package loadertest is what the browser tests of the packages the loader
// serves (and the bench's IndexedDB page) use to run the shipped hook
// modules themselves: imported as ES modules from Blob URLs of their
// embedded sources, composed as tabfence.js composes them, installed as the
// loader installs them. It uses eval and unsafe, so no shipped package
// imports it.
package loadertest

import (
	"context"
	"errors"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/jsglue/loader"
)

// importSrc imports a module's source from a Blob URL. Made on first use,
// never at start: a page's CSP may refuse eval.
const importSrc = `(src) => {
  const url = URL.createObjectURL(new Blob([src], {type: "text/javascript"}));
  return import(url).finally(() => URL.revokeObjectURL(url));
}`

// Import imports the ES module whose source is src and returns its
// namespace.
func Import(ctx context.Context, src string) (js.Value, error) {
	imp, err := jsglue.Try(func() js.Value { return js.Global().Call("eval", importSrc) })
	if err != nil {
		return js.Undefined(), err
	}
	return jsglue.Await(ctx, imp.Invoke(src))
}

// NewFastPath makes the loader's fast path from core.js and the given
// groups (name -> the source of a module exporting hooks(core)), as
// tabfence.js makes it.
func NewFastPath(ctx context.Context, groups map[string]string) (js.Value, error) {
	core, err := Import(ctx, loader.CoreModule)
	if err != nil {
		return js.Undefined(), err
	}
	factories := js.Global().Get("Object").New()
	for name, src := range groups {
		m, err := Import(ctx, src)
		if err != nil {
			return js.Undefined(), err
		}
		if m.Get("hooks").Type() != js.TypeFunction {
			return js.Undefined(), errors.New("loader: the module of group " + name + " exports no hooks")
		}
		factories.Set(name, m.Get("hooks"))
	}
	return core.Call("fastPath", factories), nil
}

// Install installs fast as the loader installs it (nil-safe uninstall
// returned).
func Install(fast js.Value) (uninstall func()) {
	reflect, key := js.Global().Get("Reflect"), js.Global().Get("Symbol").Call("for", loader.FastPathKey)
	reflect.Call("set", js.Global(), key, fast)
	return func() { reflect.Call("deleteProperty", js.Global(), key) }
}

// Exports returns this instance's wasm exports (see GoInstance).
func Exports() (js.Value, error) {
	g, err := GoInstance()
	if err != nil {
		return js.Undefined(), err
	}
	return g.Get("_inst").Get("exports"), nil
}
