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
	"testing"

	"github.com/stretchr/testify/require"

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

// RequireLayout checks hook module src, group name's, against layout, the
// version of its hooks its Go package speaks: the module exports that
// layout, and installed, the group is found at that layout and ignored at
// any other.
func RequireLayout(t *testing.T, name, src string, layout int) {
	t.Helper()
	m, err := Import(t.Context(), src)
	require.NoError(t, err)
	require.Equal(t, js.TypeNumber, m.Get("layout").Type(), "the module of group %s exports no layout", name)
	require.Equal(t, layout, m.Get("layout").Int(), "the layout of group %s's module against its Go package's", name)
	fast, err := NewFastPath(t.Context(), map[string]string{name: src})
	require.NoError(t, err)
	defer Install(fast)()
	require.True(t, loader.Group(name, layout).Present(), "group %s at its layout", name)
	require.False(t, loader.Group(name, layout+1).Present(), "group %s at another layout", name)
	require.False(t, loader.Group(name, layout-1).Present(), "group %s at another layout", name)
}
