//go:build js && wasm

package browser

import (
	"testing"

	"github.com/tabfence/tabfence/jsglue/loader"
	"github.com/tabfence/tabfence/jsglue/loader/loadertest"
)

// append.js's layout is the one this package speaks (a drift would
// silently turn the loader's append hooks off).
func TestLoaderLayout(t *testing.T) {
	loadertest.RequireLayout(t, loader.GroupOutbox, LoaderJS, loaderLayout)
}
