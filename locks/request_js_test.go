//go:build js && wasm

package locks

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue"
)

// In the browser the election scenarios (election_test.go) run on the real
// navigator.locks.
func testBackend(*testing.T) backend { return platform }

func holdByHand(t *testing.T, ctx context.Context, name string, fn func(context.Context) error) error {
	return Request(ctx, name, Options{}, fn)
}

func lockName(t *testing.T) string {
	n, err := Name(uniqueScope(t), 1)
	require.NoError(t, err)
	return n
}

func snapshot(t *testing.T) Snapshot {
	t.Helper()
	s, err := Query(context.Background())
	require.NoError(t, err)
	return s
}

func TestRequestHoldsWhileFnRuns(t *testing.T) {
	name := lockName(t)
	ran := false
	err := Request(context.Background(), name, Options{}, func(ctx context.Context) error {
		ran = true
		s := snapshot(t) // fn may await: it is on its own goroutine
		assert.True(t, s.Holds(name), "lock not held inside fn")
		for _, i := range s.Held {
			if i.Name == name && (i.Mode != Exclusive || i.ClientID == "") {
				t.Errorf("info %+v", i)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.True(t, ran)
	require.False(t, snapshot(t).Holds(name), "released after fn returns")
}

func TestRequestReturnsFnErrorAndRecoversPanic(t *testing.T) {
	name := lockName(t)
	mine := errors.New("mine")
	if err := Request(context.Background(), name, Options{}, func(context.Context) error { return mine }); err != mine {
		t.Fatal(err)
	}
	err := Request(context.Background(), name, Options{}, func(context.Context) error { panic("kaboom") })
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	require.False(t, snapshot(t).Holds(name), "a panicking fn releases the lock")
}

// hold takes name and keeps it until release is closed.
func hold(t *testing.T, name string, opts Options) (release func() error, ctxOut <-chan context.Context) {
	t.Helper()
	held := make(chan context.Context, 1)
	rel := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Request(context.Background(), name, opts, func(ctx context.Context) error {
			held <- ctx
			select {
			case <-rel:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	ch := make(chan context.Context, 1)
	select {
	case c := <-held:
		ch <- c
	case err := <-done:
		t.Fatalf("hold: %v", err)
	case <-time.After(wait):
		t.Fatal("hold: not granted")
	}
	var relOnce bool
	return func() error {
		if !relOnce {
			relOnce = true
			close(rel)
		}
		return <-done
	}, ch
}

func TestRequestIfAvailable(t *testing.T) {
	name := lockName(t)
	release, _ := hold(t, name, Options{})
	called := false
	err := Request(context.Background(), name, Options{IfAvailable: true}, func(context.Context) error { called = true; return nil })
	require.ErrorIs(t, err, ErrNotAcquired)
	require.False(t, called)
	release()
	require.NoError(t, Request(context.Background(), name, Options{IfAvailable: true}, func(context.Context) error { called = true; return nil }))
	require.True(t, called)
}

func TestRequestSharedHoldersCoexist(t *testing.T) {
	name := lockName(t)
	r1, _ := hold(t, name, Options{Mode: Shared})
	r2, _ := hold(t, name, Options{Mode: Shared})
	require.ErrorIs(t, Request(context.Background(), name, Options{IfAvailable: true}, func(context.Context) error { return nil }), ErrNotAcquired, "exclusive must wait for shared holders")
	r1()
	r2()
}

func TestRequestCancelWhileWaitingWithdraws(t *testing.T) {
	name := lockName(t)
	release, _ := hold(t, name, Options{})
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- Request(ctx, name, Options{}, func(context.Context) error {
			t.Error("a withdrawn request must not run")
			return nil
		})
	}()
	deadline := time.Now().Add(wait)
	for snapshot(t).Waiting(name) != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(wait):
		t.Fatal("cancel was not prompt")
	}
	n := snapshot(t).Waiting(name)
	require.Equal(t, 0, n, "%d pending after withdrawal", n)
}

func TestRequestCtxEndWhileHoldingCancelsFn(t *testing.T) {
	name := lockName(t)
	// Cancel once fn holds the lock, as the name says. (A cancel on a timer
	// raced the grant when the page's first request was slow: the abort
	// rejected the request while the browser was granting it, and the
	// browser released that grant a moment after Request returned.)
	ctx, cancel := context.WithCancel(context.Background())
	err := Request(ctx, name, Options{}, func(fctx context.Context) error {
		go cancel()
		<-fctx.Done()
		return fctx.Err()
	})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, snapshot(t).Holds(name), "released")
}

func TestRequestStealRejectsHolderWithAbort(t *testing.T) {
	name := lockName(t)
	release, ctxs := hold(t, name, Options{})
	holderCtx := <-ctxs
	stole := false
	err := Request(context.Background(), name, Options{Steal: true}, func(context.Context) error {
		stole = true
		select {
		case <-holderCtx.Done():
		case <-time.After(wait):
			t.Error("holder's ctx did not end while the stealer holds")
		}
		return nil
	})
	require.NoError(t, err)
	require.True(t, stole)
	require.ErrorIs(t, context.Cause(holderCtx), ErrStolen)
	require.ErrorIs(t, release(), ErrStolen, "holder's Request must return ErrStolen")
}

func TestRequestInvalidOptionsNeverReachJS(t *testing.T) {
	err := Request(context.Background(), "x", Options{Steal: true, IfAvailable: true}, func(context.Context) error { return nil })
	require.ErrorIs(t, err, ErrInvalidOptions)
	// A name the browser rejects comes back as its DOMException.
	err = Request(context.Background(), "-reserved", Options{}, func(context.Context) error { return nil })
	require.ErrorIs(t, err, jsglue.ErrNotSupported)
}

// withoutLocks shadows navigator.locks for the duration of fn.
func withoutLocks(t *testing.T, fn func()) {
	t.Helper()
	nav := js.Global().Get("navigator")
	def := js.Global().Get("Object").Get("defineProperty")
	desc := js.Global().Get("Object").New()
	desc.Set("value", js.Undefined())
	desc.Set("configurable", true)
	def.Invoke(nav, "locks", desc)
	defer func() {
		js.Global().Get("Reflect").Call("deleteProperty", nav, "locks") // the prototype's getter shows again
		require.Equal(t, js.TypeObject, nav.Get("locks").Type(), "navigator.locks not restored")
	}()
	fn()
}

func TestUnavailable(t *testing.T) {
	withoutLocks(t, func() {
		err := Request(context.Background(), "x", Options{}, func(context.Context) error { return nil })
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, jsglue.ErrUnavailable) {
			t.Fatal(err)
		}
		if _, err := Query(context.Background()); !errors.Is(err, ErrUnavailable) {
			t.Fatal(err)
		}
		e, err := NewElection(Config{Scope: "s", Protocol: 1})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(); !errors.Is(err, ErrUnavailable) {
			t.Fatal(err)
		}
		_, err = e.Steal(context.Background())
		if !errors.Is(err, ErrUnavailable) {
			t.Fatal(err)
		}
		if jsglue.NameOf(err) != "NotSupportedError" {
			t.Fatal(jsglue.NameOf(err))
		}
		e.Close()
	})
	require.NoError(t, Request(context.Background(), lockName(t), Options{}, func(context.Context) error { return nil }), "after restore")
}

func settle(base int) int {
	n := runtime.NumGoroutine()
	for i := 0; i < 100 && n > base; i++ {
		time.Sleep(time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}

// 10,000 requests — granted, not granted, queued then withdrawn — leave no
// live callback, no goroutine and no lock behind.
func TestRequestLeaksNothing(t *testing.T) {
	name := lockName(t)
	baseCB := jsglue.LiveCallbacks()
	baseG := settle(0)
	noop := func(context.Context) error { return nil }
	const workers, each, waiters = 4, 500, 8000

	// 2,000 granted requests (each costs an IPC round trip to the browser
	// process for request and release), from 4 goroutines on 4 names,
	// half IfAvailable, half plain: callback, Deferred, fn goroutine.
	t0 := time.Now()
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			n := name + ":" + strconv.Itoa(w)
			for i := 0; i < each; i++ {
				if err := Request(context.Background(), n, Options{IfAvailable: i%2 == 0}, noop); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		require.NoError(t, <-errc)
	}

	// 8,000 requests queued behind a held lock (4 goroutines), then
	// withdrawn: the ctx is cancelled once the request is in the
	// browser's queue (callback, AbortSignal, Await: all released).
	t1 := time.Now()
	release, _ := hold(t, name, Options{})
	for w := 0; w < workers; w++ {
		go func() {
			for i := 0; i < waiters/workers; i++ {
				ctx, cancel := context.WithCancel(context.Background())
				err := request(ctx, name, Options{}, func(context.Context) error {
					t.Error("withdrawn request ran")
					return nil
				}, cancel)
				if !errors.Is(err, context.Canceled) {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		require.NoError(t, <-errc)
	}
	require.NoError(t, release())
	require.Equal(t, baseCB, jsglue.LiveCallbacks(), "live callbacks")
	got := settle(baseG)
	require.LessOrEqual(t, got, baseG+2, "goroutines %d, baseline %d", got, baseG)
	s := snapshot(t)
	require.False(t, s.Holds(name), "lock state left behind")
	require.Equal(t, 0, s.Waiting(name), "lock state left behind")
	t.Logf("granted %v, withdrawn %v", t1.Sub(t0), time.Since(t1))
	t.Logf("callbacks %d -> %d, goroutines %d -> %d", baseCB, jsglue.LiveCallbacks(), baseG, runtime.NumGoroutine())
}

func TestElectionsLeakNothing(t *testing.T) {
	baseCB := jsglue.LiveCallbacks()
	baseG := settle(0)
	scope := uniqueScope(t)
	for i := 0; i < 20; i++ {
		a := newProbe(t, "a", scope, 1, nil).start()
		a.waitLeader()
		b := newProbe(t, "b", scope, 1, nil).start()
		b.waitFollower()
		a.e.Close()
		b.waitLeader()
		b.e.Close()
		<-a.e.Done()
		<-b.e.Done()
	}
	require.Equal(t, baseCB, jsglue.LiveCallbacks(), "live callbacks")
	got := settle(baseG)
	require.LessOrEqual(t, got, baseG+2, "goroutines %d, baseline %d", got, baseG)
}
