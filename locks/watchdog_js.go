//go:build js && wasm

package locks

import (
	"context"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

// The browser half of the watchdog: the heartbeat BroadcastChannel and the
// page's visibility and lifecycle events. The rules are in watchdog.go.

// jsBeacon is one election's heartbeat channel.
type jsBeacon struct {
	h       beaconHooks
	bc      js.Value
	port    js.Value // posts to the MessageChannel that sets each heartbeat's timer
	stop    []func()
	timerCB *jsglue.Callback

	mu    sync.Mutex
	gen   float64 // the heartbeat chain that may run; bumped by every beat
	ctx   context.Context
	token uint64
}

func platformBeacon(name string, h beaconHooks) (beacon, error) {
	b := &jsBeacon{h: h}
	bc, err := jsglue.Try(func() js.Value { return js.Global().Get("BroadcastChannel").New(name) })
	if err != nil {
		return nil, err
	}
	mc, err := jsglue.Try(func() js.Value { return js.Global().Get("MessageChannel").New() })
	if err != nil {
		bc.Call("close")
		return nil, err
	}
	b.bc = bc
	onMsg := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
		b.receive(args)
		return nil
	})
	bc.Set("onmessage", onMsg.Value)
	b.stop = append(b.stop, func() { bc.Set("onmessage", js.Null()); bc.Call("close"); onMsg.Release() })

	// A heartbeat is posted from a timer task (a frozen or hung page runs
	// none), and each next timer is set from a MessageChannel task, not
	// from the timer's own: a timer set from a timer task is "chained", and
	// Chromium throttles chains five deep in long-hidden pages to one
	// wake-up a minute.
	b.timerCB = jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
		if gen, ok := b.live(args); ok {
			b.post()
			b.port.Call("postMessage", gen)
		}
		return nil
	})
	portCB := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
		if len(args) > 0 {
			if gen, ok := b.live([]js.Value{args[0].Get("data")}); ok {
				js.Global().Call("setTimeout", b.timerCB.Value, HeartbeatEvery.Milliseconds(), gen)
			}
		}
		return nil
	})
	p1 := mc.Get("port1")
	p1.Set("onmessage", portCB.Value)
	b.port = mc.Get("port2")
	b.stop = append(b.stop, func() {
		p1.Set("onmessage", js.Null())
		p1.Call("close")
		b.port.Call("close")
		portCB.Release()
		b.timerCB.Release()
	})
	b.watchPage()
	return b, nil
}

// watchPage reports the page's visibility and lifecycle now and on every
// change. Without a document (a worker) the page counts as hidden: a worker
// never steals.
func (b *jsBeacon) watchPage() {
	doc, err := jsglue.Get(js.Global(), "document")
	if err != nil || doc.Type() != js.TypeObject {
		b.h.visible(false)
		return
	}
	visible := func() bool {
		v, err := jsglue.Get(doc, "visibilityState")
		return err == nil && v.Type() == js.TypeString && v.String() == "visible"
	}
	b.h.visible(visible())
	listen := func(event string, fn func()) {
		cb := jsglue.NewCallback(func(js.Value, []js.Value) any { fn(); return nil })
		doc.Call("addEventListener", event, cb.Value)
		b.stop = append(b.stop, func() { doc.Call("removeEventListener", event, cb.Value); cb.Release() })
	}
	listen("visibilitychange", func() { b.h.visible(visible()) })
	listen("freeze", func() { b.h.frozen(true) })
	listen("resume", func() { b.h.frozen(false) })
}

// receive validates a message of the heartbeat channel: an object whose
// token is a positive integer number. Anything else is counted and dropped.
func (b *jsBeacon) receive(args []js.Value) {
	if len(args) == 0 {
		return
	}
	data, err := jsglue.Get(args[0], "data")
	if err != nil || data.Type() != js.TypeObject {
		b.h.malformed()
		return
	}
	t, err := jsglue.Get(data, "token")
	if err != nil {
		b.h.malformed()
		return
	}
	isNum := t.Type() == js.TypeNumber
	f := 0.0
	if isNum {
		f = t.Float()
	}
	tok, ok := ParseHeartbeat(f, isNum)
	if !ok {
		b.h.malformed()
		return
	}
	b.h.heard(tok)
}

// live reports whether the chain step carrying args[0] may run: it belongs
// to the current chain and the leadership has not ended.
func (b *jsBeacon) live(args []js.Value) (float64, bool) {
	if len(args) == 0 || args[0].Type() != js.TypeNumber {
		return 0, false
	}
	gen := args[0].Float()
	b.mu.Lock()
	defer b.mu.Unlock()
	return gen, gen == b.gen && b.ctx != nil && b.ctx.Err() == nil
}

func (b *jsBeacon) post() {
	b.mu.Lock()
	tok := b.token
	b.mu.Unlock()
	msg := js.Global().Get("Object").New()
	msg.Set("token", float64(tok))
	msg.Set("at", js.Global().Get("Date").Call("now"))
	_, _ = jsglue.Call(b.bc, "postMessage", msg)
}

func (b *jsBeacon) beat(ctx context.Context, token uint64) {
	b.mu.Lock()
	b.gen++
	gen := b.gen
	b.ctx, b.token = ctx, token
	b.mu.Unlock()
	b.post()
	_, _ = jsglue.Call(b.port, "postMessage", gen)
}

func (b *jsBeacon) close() {
	b.mu.Lock()
	b.gen++
	b.ctx = nil
	b.mu.Unlock()
	for _, f := range b.stop {
		f()
	}
	b.stop = nil
}
