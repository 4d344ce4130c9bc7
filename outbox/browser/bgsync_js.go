//go:build js && wasm

package browser

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/internal/deadline"
	"github.com/tabfence/tabfence/jsglue"
)

// bgSync is a page's side of Background Sync: it registers the queue's sync
// tag (SyncTag) so that the origin's Service Worker, if it has one, drains
// the queue once the page is gone. Best effort: never awaited by an enqueue,
// failures counted and dropped. Coalesced: at most one registration in
// flight and one a syncEvery (leading and trailing edge, as
// announceChanged), since every registration wakes the worker when online.
type bgSync struct {
	mu     sync.Mutex
	armed  bool      // a registration is scheduled and not issued yet
	lastAt time.Time // when the last one was issued
	call   sync.Mutex
	off    atomic.Bool
	// Registered and Failed count the registrations that resolved and the
	// ones that failed; Checked is set once the check at open is done
	// (tests read them).
	Registered, Failed atomic.Int64
	Checked            atomic.Bool
}

// syncEvery bounds how often a page registers the sync tag.
const syncEvery = time.Second

// registerSync asks for a sync registration issued after now (after an
// enqueue's commit, from its later task, and once at open). Passive
// runtimes (the worker itself) and NoBackgroundSync never register.
func (r *Runtime) registerSync() {
	if r.cfg.Passive || r.cfg.NoBackgroundSync || r.bs.off.Load() || r.closed.Load() {
		return
	}
	r.bs.mu.Lock()
	if r.bs.armed {
		r.bs.mu.Unlock()
		return // the scheduled one is issued after this commit
	}
	r.bs.armed = true
	wait := time.Until(r.bs.lastAt.Add(syncEvery))
	r.bs.mu.Unlock()
	run := func() {
		r.bs.call.Lock() // one in flight
		defer r.bs.call.Unlock()
		r.bs.mu.Lock()
		r.bs.armed, r.bs.lastAt = false, time.Now()
		r.bs.mu.Unlock()
		if !r.closed.Load() {
			r.registerSyncOnce(r.ctx)
		}
	}
	if wait > 0 {
		time.AfterFunc(wait, run)
		return
	}
	go run()
}

// registerSyncIfQueued registers the sync tag at open only when the queue
// has unsettled records of its user: a page that opens on an empty queue
// wakes no worker. It runs on its own goroutine: the page's open does not
// wait for the count.
func (r *Runtime) registerSyncIfQueued() {
	defer r.bs.Checked.Store(true)
	user := r.ob.QueueSession().UserID
	if user == "" || r.cfg.Passive || r.cfg.NoBackgroundSync {
		return
	}
	ctx, cancel := deadline.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	if n, err := r.unsettled(ctx, user); err == nil && n > 0 {
		r.registerSync()
	}
}

// registerSyncOnce is navigator.serviceWorker.getRegistration() then
// reg.sync.register(tag). Not serviceWorker.ready: it never settles on a
// page without a worker. A browser without service workers or SyncManager
// turns registration off for the runtime's life.
func (r *Runtime) registerSyncOnce(ctx context.Context) {
	ctx, cancel := deadline.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	sw := jsglue.Field(js.Global().Get("navigator"), "serviceWorker")
	if sw.Type() != js.TypeObject || sw.Get("getRegistration").Type() != js.TypeFunction {
		r.bs.off.Store(true)
		return
	}
	p, err := jsglue.Call(sw, "getRegistration")
	if err == nil {
		var reg js.Value
		if reg, err = jsglue.Await(ctx, p); err == nil {
			if reg.Type() != js.TypeObject {
				return // no worker for this page (yet): a later enqueue tries again
			}
			sm := jsglue.Field(reg, "sync")
			if sm.Type() != js.TypeObject || sm.Get("register").Type() != js.TypeFunction {
				r.bs.off.Store(true) // no SyncManager (Firefox, Safari)
				return
			}
			if p, err = jsglue.Call(sm, "register", r.lockName); err == nil {
				_, err = jsglue.Await(ctx, p)
			}
		}
	}
	if err != nil {
		r.bs.Failed.Add(1)
		return
	}
	r.bs.Registered.Add(1)
}
