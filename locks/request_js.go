//go:build js && wasm

package locks

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

// lockManager returns navigator.locks, or ErrUnavailable. It is looked up
// on every call (not cached) so a page or test that removes or restores it
// is seen at once.
func lockManager() (js.Value, error) {
	lm, err := jsglue.Try(func() js.Value {
		nav := js.Global().Get("navigator")
		if nav.Type() != js.TypeObject {
			return js.Undefined()
		}
		return nav.Get("locks")
	})
	if err != nil || lm.Type() != js.TypeObject || lm.Get("request").Type() != js.TypeFunction {
		return js.Undefined(), ErrUnavailable
	}
	return lm, nil
}

func platformAvailable() error {
	_, err := lockManager()
	return err
}

// holder tracks one granted (or never granted) request.
type holder struct {
	mu       sync.Mutex
	granted  bool
	finished bool // Request stopped listening: a late grant runs nothing
	cancel   context.CancelCauseFunc
	done     chan struct{}
	err      error
}

// grant runs on the JavaScript event loop when the browser grants the
// lock. It must not block: it starts fn on a goroutine and returns at once a
// promise that is resolved when fn returns, which releases the lock.
func (h *holder) grant(ctx context.Context, fn func(context.Context) error) any {
	h.mu.Lock()
	if h.finished {
		h.mu.Unlock()
		return nil // release at once
	}
	h.granted = true
	fctx, cancel := context.WithCancelCause(ctx)
	h.cancel = cancel
	h.mu.Unlock()

	// The promise that holds the lock. Its resolve function is also put
	// in the loader's registry (see heldLocks), so that if this Go program
	// dies while holding the lock — an exit, a trap — the loader resolves
	// it and the browser gives the lock to the next tab. Without that, a
	// dead runtime would keep leading for as long as its tab stays open.
	pr := jsPromise.Call("withResolvers")
	resolve := pr.Get("resolve")
	reg := heldLocks()
	if reg.Truthy() {
		_, _ = jsglue.Call(reg, "add", resolve)
	}
	go func() {
		defer close(h.done)
		h.err = runFn(fctx, fn)
		cancel(context.Canceled)
		// Always resolve: fn's error travels in Go, not through
		// JavaScript, so its identity survives.
		if reg.Truthy() {
			_, _ = jsglue.Call(reg, "delete", resolve)
		}
		resolve.Invoke()
	}()
	return pr.Get("promise")
}

var (
	jsPromise     = js.Global().Get("Promise")
	heldLocksOnce sync.Once
	heldLocksSet  js.Value
)

// heldLocks is the loader's registry of the resolve functions of held
// locks: a Set at globalThis[$TABFENCE_LOCKS] (jsglue/loader/tabfence.js
// creates it per runtime), or undefined when the program runs without the
// loader (tests).
func heldLocks() js.Value {
	heldLocksOnce.Do(func() {
		heldLocksSet = js.Undefined()
		name, ok := syscall.Getenv("TABFENCE_LOCKS")
		if !ok || name == "" {
			return
		}
		set, err := jsglue.Get(js.Global(), name)
		if err == nil && set.Type() == js.TypeObject {
			heldLocksSet = set
		}
	})
	return heldLocksSet
}

func platformRequest(ctx context.Context, name string, opts Options, fn func(context.Context) error, queued func()) error {
	lm, err := lockManager()
	if err != nil {
		return err
	}
	o := js.Global().Get("Object").New()
	o.Set("mode", opts.Mode.String())
	if opts.IfAvailable {
		o.Set("ifAvailable", true)
	}
	if opts.Steal {
		o.Set("steal", true)
	}
	// The spec forbids a signal with steal or ifAvailable; neither waits,
	// so neither needs one.
	stopSignal := func() bool { return false }
	if !opts.IfAvailable && !opts.Steal {
		var sig js.Value
		sig, stopSignal = jsglue.Signal(ctx)
		o.Set("signal", sig)
	}

	h := &holder{done: make(chan struct{})}
	cb := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
		if len(args) == 0 || args[0].IsNull() || args[0].IsUndefined() {
			return nil // ifAvailable and not available
		}
		return h.grant(ctx, fn)
	})
	defer cb.Release()
	defer stopSignal()

	p, err := jsglue.Call(lm, "request", name, o, cb.Value)
	if err != nil {
		return err
	}
	if queued != nil {
		queued()
	}
	// Wait for the request itself, not for ctx: a cancelled ctx aborts
	// the signal (withdrawing a waiting request, which rejects p) or
	// cancels fn's ctx (so fn returns and p resolves). Either way p settles.
	_, perr := jsglue.Await(context.Background(), p)

	h.mu.Lock()
	h.finished = true
	granted, cancel := h.granted, h.cancel
	h.mu.Unlock()

	if granted {
		if perr != nil {
			// The promise our callback returned never rejects and
			// outlives nothing, so a rejection after the grant is the
			// browser breaking the lock: a steal (AbortError).
			cancel(ErrStolen)
			<-h.done
			if errors.Is(perr, jsglue.ErrAbort) {
				return ErrStolen
			}
			return perr
		}
		<-h.done
		return h.err
	}
	switch {
	case perr == nil:
		return ErrNotAcquired
	case ctx.Err() != nil:
		return ctx.Err() // withdrawn from the queue
	case errors.Is(perr, jsglue.ErrAbort):
		// Granted and stolen before our callback ran.
		return ErrStolen
	}
	return perr
}

func platformQuery(ctx context.Context) (Snapshot, error) {
	lm, err := lockManager()
	if err != nil {
		return Snapshot{}, err
	}
	p, err := jsglue.Call(lm, "query")
	if err != nil {
		return Snapshot{}, err
	}
	v, err := jsglue.Await(ctx, p)
	if err != nil {
		return Snapshot{}, err
	}
	if v.Type() != js.TypeObject {
		return Snapshot{}, nil
	}
	return Snapshot{Held: infos(v.Get("held")), Pending: infos(v.Get("pending"))}, nil
}

func infos(arr js.Value) []Info {
	if arr.Type() != js.TypeObject {
		return nil
	}
	n := arr.Length()
	out := make([]Info, 0, n)
	for i := 0; i < n; i++ {
		it := arr.Index(i)
		if it.Type() != js.TypeObject {
			continue
		}
		mode, _ := ParseMode(str(it.Get("mode")))
		out = append(out, Info{Name: str(it.Get("name")), Mode: mode, ClientID: str(it.Get("clientId"))})
	}
	return out
}

func str(v js.Value) string {
	if v.Type() != js.TypeString {
		return ""
	}
	return v.String()
}
