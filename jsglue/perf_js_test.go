//go:build js && wasm

package jsglue

import (
	"syscall/js"
	"testing"
)

// The JavaScript side of the API's calls: n calls of f, each awaited.
func benchCalls(b *testing.B, f js.Value) {
	loop := js.Global().Call("eval", `(async (f, n) => { for (let i = 0; i < n; i++) await f(i); })`)
	b.ResetTimer()
	if _, err := Await(b.Context(), loop.Invoke(f, b.N)); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkSyncCall(b *testing.B) {
	cb := NewCallback(func(js.Value, []js.Value) any { return nil })
	defer cb.Release()
	benchCalls(b, cb.Value)
}

func BenchmarkAsyncCall(b *testing.B) {
	cb := NewCallback(func(js.Value, []js.Value) any {
		return Async(func() (any, error) { return nil, nil })
	})
	defer cb.Release()
	benchCalls(b, cb.Value)
}

func BenchmarkResolvedCall(b *testing.B) {
	cb := NewCallback(func(js.Value, []js.Value) any {
		return js.Global().Get("Promise").Call("resolve", nil)
	})
	defer cb.Release()
	benchCalls(b, cb.Value)
}

// Go -> JS: one trivial call into JavaScript.
func BenchmarkGoToJSCall(b *testing.B) {
	f := js.Global().Call("eval", `(() => 0)`)
	for i := 0; i < b.N; i++ {
		f.Invoke()
	}
}

// Go -> JS: a property read that returns an object (a new reference).
func BenchmarkGoToJSGetObject(b *testing.B) {
	o := js.Global().Call("eval", `({x: {}})`)
	for i := 0; i < b.N; i++ {
		_ = o.Get("x")
	}
}
