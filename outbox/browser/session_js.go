//go:build js && wasm

package browser

import (
	"context"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
)

// kindSessionChanged announces that a tab changed the queue's session. Its
// payload is the new generation, nothing else: any same-origin script reads
// the channel, so no user id or credential is posted. It is a hint (see
// session.go): tabs stop flushing under an older session and read the
// stored one.
const kindSessionChanged = "SESSION_CHANGED"

// openSession starts a runtime's session: a configured user logs in (for
// every tab), otherwise the tab takes the queue's stored session as its own.
func (r *Runtime) openSession(ctx context.Context, s outbox.Session) error {
	if s.UserID == "" {
		_, err := r.ob.JoinSession(ctx)
		return err
	}
	ns, err := r.ob.Login(ctx, s)
	if err == nil {
		r.announceSession(ns)
	}
	return err
}

// announceSession posts the generation of s to the other tabs.
func (r *Runtime) announceSession(s outbox.Session) {
	o := js.Global().Get("Object").New()
	o.Set("gen", float64(s.AuthGeneration))
	r.post(kindSessionChanged, o)
}

// onSessionAnnounced handles another tab's kindSessionChanged: a flush of
// this tab stops before its next send, and the stored session is read from
// a goroutine (never from the message's callback).
func (r *Runtime) onSessionAnnounced(p js.Value) {
	if p.Type() == js.TypeObject {
		if v, err := jsglue.Get(p, "gen"); err == nil && v.Type() == js.TypeNumber {
			if f := v.Float(); f >= 1 && f <= 1<<53-1 {
				r.ob.NoteSession(uint64(f))
			}
		}
	}
	go r.syncSession()
}

// syncSession reads the queue's stored session (not while frozen: the
// resume event reads it) and, when it changed, refreshes the status and
// flushes for the new user.
func (r *Runtime) syncSession() {
	if r.frozen.Load() || r.closed.Load() {
		return
	}
	before := r.ob.QueueSession()
	s, err := r.ob.SyncSession(r.ctx)
	if err != nil || s == before {
		return
	}
	r.markDirty(false)
	r.Kick("session")
}
