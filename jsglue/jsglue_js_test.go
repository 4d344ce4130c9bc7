//go:build js && wasm

package jsglue

import (
	"context"
	"errors"
	"syscall/js"
	"testing"
	"time"
)

func eval(src string) js.Value { return js.Global().Call("eval", src) }

func TestAwaitResolves(t *testing.T) {
	v, err := Await(context.Background(), eval(`new Promise(r => setTimeout(() => r(42), 5))`))
	if err != nil || v.Int() != 42 {
		t.Fatalf("got %v, %v", v, err)
	}
}

func TestAwaitPlainValue(t *testing.T) {
	v, err := Await(context.Background(), js.ValueOf("x"))
	if err != nil || v.String() != "x" {
		t.Fatalf("got %v, %v", v, err)
	}
}

func TestAwaitRejectionKeepsDOMExceptionName(t *testing.T) {
	_, err := Await(context.Background(), eval(`Promise.reject(new DOMException("full", "QuotaExceededError"))`))
	if !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("got %v", err)
	}
	_, err = Await(context.Background(), eval(`Promise.reject("a string")`))
	var je *JSError
	if !errors.As(err, &je) || je.Message != "a string" {
		t.Fatalf("got %#v", err)
	}
	_, err = Await(context.Background(), eval(`Promise.reject(undefined)`))
	if err == nil {
		t.Fatal("rejection with undefined must be an error")
	}
}

func TestAwaitCancelReturnsPromptlyAndLeaksNothing(t *testing.T) {
	base := LiveCallbacks()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := Await(ctx, eval(`new Promise(() => {})`))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if time.Since(start) > time.Second {
		t.Fatal("cancellation was not prompt")
	}
	if got := LiveCallbacks(); got != base {
		t.Fatalf("live callbacks %d, want %d", got, base)
	}
}

func TestAwaitManyLeavesCallbackCountUnchanged(t *testing.T) {
	base := LiveCallbacks()
	for i := 0; i < 10000; i++ {
		if _, err := Await(context.Background(), eval(`Promise.resolve(1)`)); err != nil {
			t.Fatal(err)
		}
	}
	if got := LiveCallbacks(); got != base {
		t.Fatalf("live callbacks %d, want %d", got, base)
	}
}

func TestCallbackAfterReleaseIsHarmless(t *testing.T) {
	calls := 0
	cb := NewCallback(func(js.Value, []js.Value) any { calls++; return 7 })
	if got := cb.Value.Invoke().Int(); got != 7 {
		t.Fatalf("got %d", got)
	}
	cb.Release()
	if !cb.Value.Invoke().IsUndefined() || calls != 1 {
		t.Fatal("released callback ran")
	}
}

func TestCallbackPanicIsRecovered(t *testing.T) {
	var got any
	PanicHandler = func(r any) { got = r }
	defer func() { PanicHandler = nil }()
	cb := NewCallback(func(js.Value, []js.Value) any { panic("boom") })
	defer cb.Release()
	cb.Value.Invoke()
	if got != "boom" {
		t.Fatalf("panic handler saw %v", got)
	}
}

func TestDeferredAndAsync(t *testing.T) {
	d := NewDeferred()
	go d.Resolve("done")
	v, err := Await(context.Background(), d.Promise)
	if err != nil || v.String() != "done" {
		t.Fatalf("got %v %v", v, err)
	}
	p := Async(func() (any, error) { return nil, ErrNotAllowed })
	_, err = Await(context.Background(), p)
	if !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("got %v", err)
	}
	p = Async(func() (any, error) { panic("kaboom") })
	if _, err = Await(context.Background(), p); err == nil {
		t.Fatal("panic in Async must reject")
	}
}

func TestCallKeepsThrownName(t *testing.T) {
	_, err := Call(js.Global().Get("JSON"), "parse", "{bad")
	var je *JSError
	if !errors.As(err, &je) || je.Name != "SyntaxError" {
		t.Fatalf("got %#v", err)
	}
}

func TestSignalAbortsWithAbortError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sig, stop := Signal(ctx)
	defer stop()
	cancel()
	// A request given the signal rejects with the signal's reason.
	_, err := Await(context.Background(), eval(`(s) => new Promise((_, rej) => { if (s.aborted) rej(s.reason); s.onabort = () => rej(s.reason); })`).Invoke(sig))
	if !errors.Is(err, ErrAbort) {
		t.Fatalf("got %v", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	sig2, stop2 := Signal(ctx2)
	defer stop2()
	if !sig2.Get("aborted").Bool() {
		t.Fatal("signal of a cancelled ctx must start aborted")
	}
}

func TestGetSurvivesThrowingGetterAndProxy(t *testing.T) {
	obj := eval(`({ get bad() { throw new RangeError("nope"); }, ok: 1 })`)
	if _, err := Get(obj, "bad"); !errors.Is(err, ErrRange) {
		t.Fatalf("getter: got %v", err)
	}
	if v, err := Get(obj, "ok"); err != nil || v.Int() != 1 {
		t.Fatalf("ok: got %v %v", v, err)
	}
	proxy := eval(`new Proxy({}, { get() { throw new TypeError("trap"); } })`)
	if _, err := Get(proxy, "anything"); !errors.Is(err, ErrType) {
		t.Fatalf("proxy: got %v", err)
	}
	if _, err := Get(js.Null(), "x"); !errors.Is(err, ErrType) {
		t.Fatalf("null: got %v", err)
	}
	// FromJS reads name/message through Get: a hostile rejection reason
	// must not kill the program either.
	_, err := Await(context.Background(), eval(`Promise.reject(new Proxy({}, { get() { throw 1; } }))`))
	if err == nil {
		t.Fatal("want an error")
	}
}

// Async settles at once what did not block, and still settles later what
// did.
func TestAsyncSettledAndPending(t *testing.T) {
	state := js.Global().Call("eval", `(p) => { let s = "pending"; p.then(() => s = "resolved", () => s = "rejected"); return () => s; }`)
	p := Async(func() (any, error) { return "now", nil })
	probe := state.Invoke(p)
	if v, err := Await(context.Background(), p); err != nil || v.String() != "now" {
		t.Fatalf("got %v %v", v, err)
	}
	if probe.Invoke().String() != "resolved" {
		t.Fatal("not resolved")
	}
	release := make(chan struct{})
	p = Async(func() (any, error) { <-release; return "later", nil })
	go close(release)
	if v, err := Await(context.Background(), p); err != nil || v.String() != "later" {
		t.Fatalf("got %v %v", v, err)
	}
	p = Async(func() (any, error) { <-release; panic("late kaboom") })
	if _, err := Await(context.Background(), p); err == nil {
		t.Fatal("a late panic must reject")
	}
}
