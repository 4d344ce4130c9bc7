//go:build js && wasm

package loadertest

import (
	"errors"
	"syscall/js"
	"unsafe"
)

// GoInstance is wasm_exec.js's Go object of this program (for browser
// tests): the value syscall/js keeps under reference 6 (jsGo, unexported).
// The test runner (wasmbrowsertest) keeps the WebAssembly instance in a
// closure, and the Go object holds it as _inst: that is how a test reaches
// the exports the loader attaches (attach). The layout mirrors
// syscall/js.Value (ref, gcPtr); the checks fail loudly if it changes.
func GoInstance() (js.Value, error) {
	type value struct {
		_     [0]func()
		ref   uint64
		gcPtr *uint64
	}
	if unsafe.Sizeof(value{}) != unsafe.Sizeof(js.Value{}) {
		return js.Value{}, errors.New("syscall/js.Value changed its layout")
	}
	const nanHead, typeFlagObject = 0x7FF80000, 1
	v := value{ref: (nanHead|typeFlagObject)<<32 | 6}
	g := *(*js.Value)(unsafe.Pointer(&v))
	if g.Type() != js.TypeObject || g.Get("_inst").Type() != js.TypeObject || g.Get("_resume").Type() != js.TypeFunction {
		return js.Value{}, errors.New("reference 6 is not wasm_exec.js's Go object")
	}
	return g, nil
}
