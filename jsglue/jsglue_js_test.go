//go:build js && wasm

package jsglue

import (
	"context"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func eval(src string) js.Value { return js.Global().Call("eval", src) }

func TestAwaitResolves(t *testing.T) {
	v, err := Await(context.Background(), eval(`new Promise(r => setTimeout(() => r(42), 5))`))
	require.NoError(t, err)
	require.Equal(t, 42, v.Int())
}

func TestAwaitPlainValue(t *testing.T) {
	v, err := Await(context.Background(), js.ValueOf("x"))
	require.NoError(t, err)
	require.Equal(t, "x", v.String())
}

func TestAwaitRejectionKeepsDOMExceptionName(t *testing.T) {
	_, err := Await(context.Background(), eval(`Promise.reject(new DOMException("full", "QuotaExceededError"))`))
	require.ErrorIs(t, err, ErrQuotaExceeded)
	_, err = Await(context.Background(), eval(`Promise.reject("a string")`))
	var je *JSError
	require.ErrorAs(t, err, &je)
	require.Equal(t, "a string", je.Message)
	_, err = Await(context.Background(), eval(`Promise.reject(undefined)`))
	require.Error(t, err, "rejection with undefined must be an error")
}

func TestAwaitCancelReturnsPromptlyAndLeaksNothing(t *testing.T) {
	base := LiveCallbacks()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := Await(ctx, eval(`new Promise(() => {})`))
	require.ErrorIs(t, err, context.Canceled)
	require.LessOrEqual(t, time.Since(start), time.Second, "cancellation was not prompt")
	require.Equal(t, base, LiveCallbacks(), "live callbacks")
}

func TestAwaitManyLeavesCallbackCountUnchanged(t *testing.T) {
	base := LiveCallbacks()
	for i := 0; i < 10000; i++ {
		_, err := Await(context.Background(), eval(`Promise.resolve(1)`))
		require.NoError(t, err)
	}
	require.Equal(t, base, LiveCallbacks(), "live callbacks")
}

func TestCallbackAfterReleaseIsHarmless(t *testing.T) {
	calls := 0
	cb := NewCallback(func(js.Value, []js.Value) any { calls++; return 7 })
	require.Equal(t, 7, cb.Value.Invoke().Int())
	cb.Release()
	require.True(t, cb.Value.Invoke().IsUndefined(), "released callback returned a value")
	require.Equal(t, 1, calls, "released callback ran")
}

func TestCallbackPanicIsRecovered(t *testing.T) {
	var got any
	PanicHandler = func(r any) { got = r }
	defer func() { PanicHandler = nil }()
	cb := NewCallback(func(js.Value, []js.Value) any { panic("boom") })
	defer cb.Release()
	cb.Value.Invoke()
	require.Equal(t, "boom", got, "what the panic handler saw")
}

func TestDeferredAndAsync(t *testing.T) {
	d := NewDeferred()
	go d.Resolve("done")
	v, err := Await(context.Background(), d.Promise)
	require.NoError(t, err)
	require.Equal(t, "done", v.String())
	p := Async(func() (any, error) { return nil, ErrNotAllowed })
	_, err = Await(context.Background(), p)
	require.ErrorIs(t, err, ErrNotAllowed)
	p = Async(func() (any, error) { panic("kaboom") })
	_, err = Await(context.Background(), p)
	require.Error(t, err, "panic in Async must reject")
}

func TestCallKeepsThrownName(t *testing.T) {
	_, err := Call(js.Global().Get("JSON"), "parse", "{bad")
	var je *JSError
	require.ErrorAs(t, err, &je)
	require.Equal(t, "SyntaxError", je.Name)
}

func TestSignalAbortsWithAbortError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sig, stop := Signal(ctx)
	defer stop()
	cancel()
	// A request given the signal rejects with the signal's reason.
	_, err := Await(context.Background(), eval(`(s) => new Promise((_, rej) => { if (s.aborted) rej(s.reason); s.onabort = () => rej(s.reason); })`).Invoke(sig))
	require.ErrorIs(t, err, ErrAbort)
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	sig2, stop2 := Signal(ctx2)
	defer stop2()
	require.True(t, sig2.Get("aborted").Bool(), "signal of a cancelled ctx must start aborted")
}

func TestGetSurvivesThrowingGetterAndProxy(t *testing.T) {
	obj := eval(`({ get bad() { throw new RangeError("nope"); }, ok: 1 })`)
	_, err := Get(obj, "bad")
	require.ErrorIs(t, err, ErrRange, "getter")
	v, err := Get(obj, "ok")
	require.NoError(t, err)
	require.Equal(t, 1, v.Int())
	proxy := eval(`new Proxy({}, { get() { throw new TypeError("trap"); } })`)
	_, err = Get(proxy, "anything")
	require.ErrorIs(t, err, ErrType, "proxy")
	_, err = Get(js.Null(), "x")
	require.ErrorIs(t, err, ErrType, "null")
	// FromJS reads name/message through Get: a hostile rejection reason
	// must not kill the program either.
	_, err = Await(context.Background(), eval(`Promise.reject(new Proxy({}, { get() { throw 1; } }))`))
	require.Error(t, err)
}

// Async settles at once what did not block, and still settles later what
// did.
func TestAsyncSettledAndPending(t *testing.T) {
	state := js.Global().Call("eval", `(p) => { let s = "pending"; p.then(() => s = "resolved", () => s = "rejected"); return () => s; }`)
	p := Async(func() (any, error) { return "now", nil })
	probe := state.Invoke(p)
	v, err := Await(context.Background(), p)
	require.NoError(t, err)
	require.Equal(t, "now", v.String())
	require.Equal(t, "resolved", probe.Invoke().String())
	release := make(chan struct{})
	p = Async(func() (any, error) { <-release; return "later", nil })
	go close(release)
	v, err = Await(context.Background(), p)
	require.NoError(t, err)
	require.Equal(t, "later", v.String())
	p = Async(func() (any, error) { <-release; panic("late kaboom") })
	_, err = Await(context.Background(), p)
	require.Error(t, err, "a late panic must reject")
}
