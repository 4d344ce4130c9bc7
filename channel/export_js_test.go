//go:build js && wasm

package channel

import (
	"sync"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/jsglue/loader"
	"github.com/tabfence/tabfence/jsglue/loader/loadertest"
)

// The channel tests again, through the loader's fast path and the exports.
func TestExports(t *testing.T) { runChannelSuite(t, withExports) }

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

// A message the loader hands to the export is Held while SubscribeNow
// functions run, unless its header had an escape; and the message
// the hook deliverHeld builds from the held envelope is the one deliver
// builds from the message's JSON (the JavaScript API's subscribers get one
// or the other). Nothing else is Held: a Subscribe delivery, a replay.
func TestExportsHeldDeliversLikeJSON(t *testing.T) {
	withExports(t)
	name := chName(t)
	rx := openCh(t, name)
	_, deliverHeld := rx.Deliverers()
	type got struct {
		held      bool
		viaHeld   string // JSON of deliverHeld's message
		viaJSON   string // JSON of deliver's message
		fromQueue bool
	}
	var mu sync.Mutex
	var gots []got
	stringify := js.Global().Get("JSON").Get("stringify")
	rx.SubscribeNow(func(m Message) {
		g := got{held: rx.Held(m)}
		if g.held {
			// later() calls the function in a microtask: collect there.
			idx := len(gots)
			cb := js.FuncOf(func(_ js.Value, args []js.Value) any {
				mu.Lock()
				gots[idx].viaHeld = stringify.Invoke(args[0]).String()
				mu.Unlock()
				return nil
			})
			deliverHeld.Invoke(cb, m.Gap)
		}
		b := AppendJSONField(nil, `{"id":`, m.ID)
		b = AppendJSONField(b, `,"kind":`, m.Kind)
		b = AppendUintField(b, `,"payload":null,"token":`, m.Token)
		b = AppendUintField(b, `,"seq":`, m.Seq)
		b = AppendJSONField(b, `,"resource":`, m.Resource)
		b = AppendJSONField(b, `,"owner":`, m.Owner)
		b = AppendUintField(b, `,"sentAt":`, uint64(m.SentAt))
		if m.Gap {
			b = append(b, `,"gap":true}`...)
		} else {
			b = append(b, `,"gap":false}`...)
		}
		o := js.Global().Get("JSON").Call("parse", string(b))
		o.Set("payload", m.Payload)
		g.viaJSON = stringify.Invoke(o).String()
		mu.Lock()
		gots = append(gots, g)
		mu.Unlock()
	})
	queued := make(chan bool, 16)
	rx.Subscribe(func(m Message) { queued <- rx.Held(m) })
	post := js.Global().Get("Function").New("name", `
const bc = new BroadcastChannel(name);
let seq = 0;
const env = (o) => ({protocol: "tabfence", version: 1, id: "id" + seq, kind: "k", resource: "r", owner: "o", token: 5, seq: ++seq, sentAt: 1, payload: {n: seq}, ...o});
const posts = [env({}), env({kind: "𝄞 ü ✓ \u2028"}), env({owner: "q\"b"}), env({resource: "\ud800 lone"}), env({sentAt: -0, seq: 9}), env({token: 6, seq: 1, payload: undefined})];
for (const p of posts) bc.postMessage(p);
bc.close();
return posts.length;`)
	n := post.Invoke(name).Int()
	waitFor(t, "every message delivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(gots) != n {
			return false
		}
		for _, g := range gots {
			if g.held && g.viaHeld == "" {
				return false
			}
		}
		return true
	})
	wantHeld := []bool{true, true, false, false, true, true} // an escape in the header: not held
	for i, g := range gots {
		if g.held != wantHeld[i] {
			t.Errorf("message %d: held %v, want %v", i, g.held, wantHeld[i])
		}
		if g.held && g.viaHeld != g.viaJSON {
			t.Errorf("message %d: deliverHeld built %s, deliver %s", i, g.viaHeld, g.viaJSON)
		}
	}
	for i := 0; i < n; i++ {
		select {
		case h := <-queued:
			if h {
				t.Error("a Subscribe delivery saw its message held")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no Subscribe delivery")
		}
	}
	// Replay delivers what was buffered, outside the export.
	rx.Buffer()
	post.Invoke(name)
	waitFor(t, "buffered", func() bool { return rx.Stats().Received == uint64(2*n) })
	mu.Lock()
	before := len(gots)
	mu.Unlock()
	rx.Replay()
	mu.Lock()
	defer mu.Unlock()
	for _, g := range gots[before:] {
		if g.held {
			t.Error("a replayed message was held")
		}
	}
}

// Text crosses xscratch, in the instance's memory, both ways, also after
// the memory grew (which detaches the loader's view of it): received
// headers, and Go's text handed to the loader during an export (here a
// Post made as exportPost makes it).
func TestExportsXScratchAcrossMemoryGrowth(t *testing.T) {
	withExports(t)
	name := chName(t)
	rx, tx := openCh(t, name), openCh(t, name)
	var got inbox
	rx.SubscribeNow(got.add)
	post := js.Global().Get("Function").New("name", "seq", `
const bc = new BroadcastChannel(name);
bc.postMessage({protocol: "tabfence", version: 1, id: "id" + seq, kind: "k", resource: "r", owner: "o", token: 1, seq, sentAt: 1, payload: seq});
bc.close();`)
	var keep [][]byte
	grow := func() {
		before := instExports(t).Get("mem").Get("buffer").Get("byteLength").Int()
		b := make([]byte, 64<<20)
		b[len(b)-1] = 1
		keep = append(keep, b)
		if after := instExports(t).Get("mem").Get("buffer").Get("byteLength").Int(); after <= before {
			t.Fatalf("memory did not grow: %d -> %d bytes", before, after)
		}
	}
	post.Invoke(name, 1)
	waitFor(t, "the first message", func() bool { return len(got.list()) == 1 })
	grow()
	post.Invoke(name, 2)
	waitFor(t, "the message after the memory grew", func() bool { return len(got.list()) == 2 })
	grow()
	// Go's side during an export: the loader reads the header from xscratch
	// through a view it must make again.
	s := NewSequencer("r", "o", 1)
	s.seq = 2
	e := s.Next("after-growth", js.ValueOf(3))
	g := loader.Entered()
	err := tx.Post(e)
	loader.Leave(g)
	require.NoError(t, err)
	waitFor(t, "the message Go posted through xscratch", func() bool { return len(got.list()) == 3 })
	if m := got.list()[2]; m.ID != e.ID || m.Kind != "after-growth" || m.Seq != 3 || m.Payload.Int() != 3 {
		t.Fatalf("got %+v, posted %+v", m, e)
	}
	if s := rx.Stats(); s.TotalDropped() != 0 || s.Delivered != 3 {
		t.Fatalf("stats %+v", s)
	}
	_ = keep
}

func instExports(t *testing.T) js.Value {
	t.Helper()
	ex, err := loadertest.Exports()
	require.NoError(t, err)
	return ex
}

// The one bound the loader's rx keeps (for memory: it copies no strings
// longer together than the channel's limits allow into a header) is Go's,
// given when the channel opens: with larger limits, an ID far beyond the
// defaults still crosses as a header through the export (Held), and one
// beyond the limits is read by Go itself (not Held) and dropped as
// oversized.
func TestExportsRxBoundIsGos(t *testing.T) {
	withExports(t)
	name := chName(t)
	l := DefaultLimits
	l.MaxID = 4000
	rx := openCh(t, name, WithLimits(l))
	var held []bool
	rx.SubscribeNow(func(m Message) { held = append(held, rx.Held(m)) })
	post := js.Global().Get("Function").New("name", `
const bc = new BroadcastChannel(name);
const env = (id, seq) => ({protocol: "tabfence", version: 1, id, kind: "k", resource: "r", owner: "o", token: 1, seq, sentAt: 1});
bc.postMessage(env("i".repeat(3000), 1));
bc.postMessage(env("i".repeat(5000), 2));
bc.close();`)
	post.Invoke(name)
	waitFor(t, "both messages", func() bool { return rx.Stats().Received == 2 })
	require.Equal(t, []bool{true}, held)
	require.Equal(t, uint64(1), rx.Stats().DroppedBy(Oversized))
}
