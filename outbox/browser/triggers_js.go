//go:build js && wasm

package browser

import (
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox/queue"
)

func (r *Runtime) installTriggers() {
	add := func(target js.Value, event, reason string, cond func() bool) {
		if target.Type() != js.TypeObject || target.Get("addEventListener").Type() != js.TypeFunction {
			return
		}
		cb := jsglue.NewCallback(func(js.Value, []js.Value) any {
			if cond == nil || cond() {
				r.Kick(reason)
			}
			return nil
		})
		target.Call("addEventListener", event, cb.Value)
		r.listeners = append(r.listeners, func() {
			target.Call("removeEventListener", event, cb.Value)
			cb.Release()
		})
	}
	g := js.Global()
	add(g, "online", "online", func() bool {
		r.ob.Reconnected() // network backoffs end: the queue drains now
		r.mu.Lock()
		r.fenceRetryAt = time.Time{} // try at once
		r.mu.Unlock()
		return true
	})
	add(g, "focus", "focus", nil)
	doc := g.Get("document")
	// Page Lifecycle: a frozen page runs no timers and gets no IndexedDB
	// events, yet channel messages still reach it and wake its goroutines.
	// A transaction it holds or starts then never ends and blocks the
	// queue's database for every tab. So on freeze: abort the open
	// flush-path transactions and start no IndexedDB work until resume.
	add(doc, "freeze", "freeze", func() bool {
		r.frozen.Store(true) // the transactions: idb's freeze tracker aborts them
		return false
	})
	add(doc, "resume", "resume", func() bool {
		r.frozen.Store(false)
		go r.syncSession() // a session announced while frozen
		r.markDirty(false)
		return true
	})
	add(doc, "visibilitychange", "visible", func() bool {
		v, err := jsglue.Get(doc, "visibilityState")
		return err == nil && v.Type() == js.TypeString && v.String() == "visible"
	})
}

// ---- channel ----

func (r *Runtime) post(kind string, payload js.Value) {
	if r.closed.Load() {
		return
	}
	_, _ = r.ch.Send(r.seq, kind, payload)
}

func (r *Runtime) onMessage(m channel.Message) {
	if m.Owner == r.id {
		return
	}
	switch m.Kind {
	case kindOutboxChanged:
		r.Kick("broadcast")
	case kindStatusChanged:
		r.markDirty(false)
	case kindSessionChanged:
		r.onSessionAnnounced(m.Payload)
	case kindStolen:
		// Another tab stole the flush lock from a frozen or hung owner.
		// If that is this tab (frozen: channel messages still arrive, its
		// IndexedDB events do not), its open transactions would block
		// the queue's database for every tab: abort them now, from this
		// message's task. The thief's lease token fences the rest.
		// The message names the owner the thief saw: another tab
		// stealing at the same moment is not the victim, and goes on
		// (the Web Lock tells the one of the two that lost).
		target := ""
		if m.Payload.Type() == js.TypeString {
			target = m.Payload.String()
		}
		r.mu.Lock()
		busy := r.busy
		r.mu.Unlock()
		if busy && (target == "" || target == r.id || r.frozen.Load()) {
			r.abortTxns()
		}
	case kindStatusAsk:
		r.answerAsk()
	case kindStatusAnswer:
		p := m.Payload
		var fence uint64
		var stalled time.Duration
		if p.Type() == js.TypeObject {
			if v, err := jsglue.Get(p, "fence"); err == nil && v.Type() == js.TypeNumber {
				fence = uint64(v.Float())
			}
			if v, err := jsglue.Get(p, "stalledMs"); err == nil && v.Type() == js.TypeNumber {
				stalled = time.Duration(v.Float()) * time.Millisecond
			}
		}
		r.mu.Lock()
		r.remoteOwner, r.remoteFence = m.Owner, fence
		act := r.wd.Answer(time.Now(), stalled)
		r.mu.Unlock()
		if act == watchSteal {
			r.requestSteal()
		}
		r.markDirty(false)
	}
}

// answerAsk answers a waiting tab's status question.
func (r *Runtime) answerAsk() {
	// The holder of the Web Lock answers from the grant on, before it
	// owns (while it takes the lease and the fence), stalled measured
	// from the grant: a tab asking then must not steal from it.
	r.mu.Lock()
	owning, lease, granted := r.owning, r.lease, !r.grantAt.IsZero()
	stalled := time.Duration(0)
	switch {
	case r.flushing && !r.lastStep.IsZero():
		stalled = time.Since(r.lastStep)
	case granted && !owning:
		stalled = time.Since(r.grantAt)
	}
	r.mu.Unlock()
	if !(owning || granted) || r.mute.Load() {
		return
	}
	// Answer from a timer task, not from this message's task: a
	// frozen tab still receives channel messages but runs no timers,
	// so it stays silent and its lock is stolen.
	var cb *jsglue.Callback
	cb = jsglue.NewCallback(func(js.Value, []js.Value) any {
		cb.Release()
		if r.mute.Load() {
			return nil
		}
		r.post(kindStatusAnswer, r.answerPayload(lease, stalled))
		return nil
	})
	js.Global().Call("setTimeout", cb.Value, 0)
}

func (r *Runtime) answerPayload(l queue.Lease, stalled time.Duration) js.Value {
	o := js.Global().Get("Object").New()
	o.Set("token", float64(l.Token))
	o.Set("fence", float64(l.FenceToken))
	o.Set("stalledMs", float64(stalled/time.Millisecond))
	return o
}

func (r *Runtime) requestSteal() {
	if r.cfg.Passive {
		return // a worker never steals from a tab
	}
	select {
	case r.stealCh <- struct{}{}:
	default:
	}
}

// ---- events and status ----
