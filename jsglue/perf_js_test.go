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

// An entry into Go after the page was idle (a 3 ms timer), after a message
// task, and back to back: what one isolated event costs, beside a loop.
// Reported as us/isolated, us/after-message and us/in-loop.
func BenchmarkIsolatedEntry(b *testing.B) {
	cb := NewCallback(func(js.Value, []js.Value) any { return nil })
	defer cb.Release()
	f := js.Global().Call("eval", `(async (f, n) => {
		const sleep = (ms) => new Promise(r => setTimeout(r, ms));
		const mc = new MessageChannel(); const tick = () => new Promise(r => { mc.port1.onmessage = r; mc.port2.postMessage(0); });
		let iso = 0, msg = 0;
		for (let i = 0; i < n; i++) { await sleep(3); const t0 = performance.now(); f(); iso += performance.now() - t0; }
		for (let i = 0; i < n; i++) { await tick(); const t0 = performance.now(); f(); msg += performance.now() - t0; }
		const t0 = performance.now(); for (let i = 0; i < n; i++) f(); const loop = performance.now() - t0;
		return [iso / n * 1000, msg / n * 1000, loop / n * 1000];
	})`)
	n := max(b.N, 100)
	v, err := Await(b.Context(), f.Invoke(cb.Value, n))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(v.Index(0).Float(), "us/isolated")
	b.ReportMetric(v.Index(1).Float(), "us/after-message")
	b.ReportMetric(v.Index(2).Float(), "us/in-loop")
}
