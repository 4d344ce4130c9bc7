//go:build js && wasm

package channel

import (
	"syscall/js"
	"testing"
	"time"

	"github.com/tabfence/tabfence/jsglue/loader"
)

// goInstance is wasm_exec.js's Go object of this program (see
// loader.GoInstance).
func goInstance(t *testing.T) js.Value {
	t.Helper()
	g, err := loader.GoInstance()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// withExports installs the loader's fast path (withFastPath) and attaches
// this instance's wasm exports to it, as the loader does: received headers
// enter Go through tabfence_channel_rx.
func withExports(t *testing.T) {
	t.Helper()
	withFastPath(t)
	ex := goInstance(t).Get("_inst").Get("exports")
	if ex.Get("tabfence_channel_rx").Type() != js.TypeFunction {
		t.Fatal("no export tabfence_channel_rx")
	}
	js.Global().Get("Reflect").Call("get", js.Global(), js.Global().Get("Symbol").Call("for", "tabfence.fastpath.v1")).Call("attach", ex)
}

// The channel tests again, through the loader's fast path and the exports.
func TestExports(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"RoundTrip", TestRoundTripAndNoSelfDelivery}, {"StaleAndGap", TestStaleLeaderDroppedAndGapReported},
		{"Hostile", TestHostileScriptPostsGarbage}, {"Buffer", TestBufferDuringLoadThenReplay},
		{"Announce", TestAnnounceWritesThenPosts}, {"PostErrors", TestPostErrorsAndCloseReleases},
		{"SubscribePanic", TestSubscribePanicDoesNotKillDelivery}, {"SubscribeNow", TestSubscribeNowInArrivalOrderBesideSubscribe},
	} {
		t.Run(tc.name, func(t *testing.T) { withExports(t); tc.f(t) })
	}
}

// A goroutine an export makes runnable (here the Subscribe delivery) runs
// before the browser's next task, as it did when the message entered Go
// through a js.Func: the loader's kick. A listener added after the
// channel's handler sets late in a later task; without the kick, nothing
// would enter Go until the test's own timer.
func TestExportsRunWokenGoroutinesAtOnce(t *testing.T) {
	withExports(t)
	name := chName(t)
	rx, tx := openCh(t, name), openCh(t, name)
	late := js.Global().Get("Object").New()
	rx.bc.Call("addEventListener", "message", js.Global().Call("eval", `((late) => () => setTimeout(() => { late.v = true; }, 0))`).Invoke(late))
	got := make(chan bool, 1)
	rx.Subscribe(func(Message) { got <- late.Get("v").Truthy() })
	if _, err := tx.Send(NewSequencer("doc", "tab", 1), "k", js.ValueOf(1)); err != nil {
		t.Fatal(err)
	}
	select {
	case wasLate := <-got:
		if wasLate {
			t.Fatal("the Subscribe delivery ran only after a later task: no kick after the export")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
}
