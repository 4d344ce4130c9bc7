//go:build js && wasm

package browser

import (
	"syscall/js"
	"time"
)

// announceLater schedules the OUTBOX_CHANGED announcement and flush hint of
// a committed enqueue (see later).
func (r *Runtime) announceLater() {
	r.lt.mu.Lock()
	r.lt.announce = true
	r.lt.mu.Unlock()
	r.later()
}

// OnAppendChange registers fn, called synchronously whenever the loader's
// target of plain appends may have changed (see UseLoader): after Login
// and Logout (before a purge starts, see Outbox.OnSessionChange) and on
// Close. One function; a later call replaces it.
func (r *Runtime) OnAppendChange(fn func()) { r.appendHook.Store(&fn) }

func (r *Runtime) appendChanged() {
	if fn := r.appendHook.Load(); fn != nil && *fn != nil {
		(*fn)()
	}
}

// announceEvery bounds how often a tab posts OUTBOX_CHANGED: a
// BroadcastChannel post costs the poster more than the rest of an enqueue's
// work on the page (docs/outbox-notes.md), and a burst of enqueues needs
// one flush hint, not one per record.
const announceEvery = 50 * time.Millisecond

// announceChanged posts OUTBOX_CHANGED now if none was posted in the last
// announceEvery, else makes sure one is posted when that interval ends
// (leading and trailing edge): every committed enqueue is followed by an
// announcement posted after its commit; a lone one at once.
func (r *Runtime) announceChanged() {
	now := time.Now()
	r.lt.mu.Lock()
	if wait := r.lt.announcedAt.Add(announceEvery).Sub(now); wait > 0 {
		if r.lt.announceT == nil {
			r.lt.announceT = time.AfterFunc(wait, func() {
				r.lt.mu.Lock()
				r.lt.announceT = nil
				r.lt.announcedAt = time.Now()
				r.lt.mu.Unlock()
				r.post(kindOutboxChanged, js.Undefined())
			})
		}
		r.lt.mu.Unlock()
		return
	}
	r.lt.announcedAt = now
	r.lt.mu.Unlock()
	r.post(kindOutboxChanged, js.Undefined())
}
