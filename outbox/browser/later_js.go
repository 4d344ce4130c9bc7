//go:build js && wasm

package browser

import (
	"sync"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
)

// later is the work an enqueue leaves to the next task (see
// Runtime.later): the OUTBOX_CHANGED announcement, the local flush hint,
// the sync tag registration and event delivery.
type later struct {
	mu          sync.Mutex
	pending     bool           // a task is scheduled and has not run yet
	announce    bool           // an enqueue committed since the last announcement
	events      []outbox.Event // events to deliver (see onEvent)
	announcedAt time.Time      // last OUTBOX_CHANGED post (see announceChanged)
	announceT   *time.Timer    // the trailing announcement, when armed
	port        js.Value       // MessageChannel port2: a message schedules the task
	stop        func()
}

// installLater sets up the task source of later: a MessageChannel, whose
// messages are tasks that run as soon as the event loop is free (unlike
// setTimeout, not clamped, nor throttled in hidden tabs).
func (r *Runtime) installLater() {
	mc, err := jsglue.Try(func() js.Value { return js.Global().Get("MessageChannel").New() })
	if err != nil || mc.Type() != js.TypeObject {
		return // no MessageChannel: later runs its work at once
	}
	cb := jsglue.NewCallback(func(js.Value, []js.Value) any {
		r.runLater()
		return nil
	})
	p1 := mc.Get("port1")
	p1.Set("onmessage", cb.Value) // starts the port
	r.lt.port = mc.Get("port2")
	r.lt.stop = func() {
		p1.Set("onmessage", js.Null())
		p1.Call("close")
		r.lt.port.Call("close")
		cb.Release()
	}
	r.listeners = append(r.listeners, r.lt.stop)
}

// later schedules the work an enqueue leaves after its commit — the
// OUTBOX_CHANGED announcement (once for every enqueue committed before the
// task runs, so always after their commits), this tab's flush hint, the
// delivery of its event (of every event: see onEvent) and the status
// refresh — in the next task rather than before the enqueue's
// promise settles: the caller's next enqueue is issued first and that work
// runs while IndexedDB commits it. A burst of enqueues announces once per
// task instead of once per record; the hints are coalescing anyway.
func (r *Runtime) later() {
	r.lt.mu.Lock()
	if r.lt.pending {
		r.lt.mu.Unlock()
		return
	}
	r.lt.pending = true
	port := r.lt.port
	r.lt.mu.Unlock()
	if port.Type() != js.TypeObject {
		r.runLater()
		return
	}
	if _, err := jsglue.Call(port, "postMessage", js.Null()); err != nil {
		r.runLater()
	}
}

// runLater does the scheduled work (in the task, or at once without a
// task source).
func (r *Runtime) runLater() {
	r.lt.mu.Lock()
	r.lt.pending = false
	announce := r.lt.announce
	r.lt.announce = false
	evs := r.lt.events
	r.lt.events = nil
	r.lt.mu.Unlock()
	dirty := announce
	for _, e := range evs {
		select {
		case r.evCh <- e:
		default: // a subscriber that cannot keep up loses events, never the queue
		}
		if e.Kind != outbox.EventSkipLocked {
			dirty = true
		}
	}
	if announce {
		r.announceChanged()
	}
	if dirty {
		r.markDirty(true)
	}
	if announce {
		r.Kick("enqueue")
		r.registerSync()
	}
}
