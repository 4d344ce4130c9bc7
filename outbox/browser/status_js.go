//go:build js && wasm

package browser

import (
	"context"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/outbox"
)

func (r *Runtime) onEvent(e outbox.Event) {
	r.mu.Lock()
	if r.owning {
		r.lastStep = time.Now()
	}
	r.mu.Unlock()
	// Delivery and the status refresh happen in the next task (later):
	// an enqueue's event then reaches the subscribers after its promise
	// settled, and no goroutine wakes on its path.
	r.lt.mu.Lock()
	if len(r.lt.events) < cap(r.evCh) {
		r.lt.events = append(r.lt.events, e)
	} // else a subscriber that cannot keep up loses events, never the queue
	r.lt.mu.Unlock()
	r.later()
}

func (r *Runtime) eventLoop() {
	for {
		var e outbox.Event
		select {
		case <-r.ctx.Done():
			return
		case e = <-r.evCh:
		}
		r.mu.Lock()
		subs := make([]func(outbox.Event), 0, len(r.subs.events))
		for _, fn := range r.subs.events {
			subs = append(subs, fn)
		}
		r.mu.Unlock()
		for {
			for _, fn := range subs {
				safeCall(func() { fn(e) })
			}
			select {
			case e = <-r.evCh:
				continue
			default:
			}
			break
		}
	}
}

func safeCall(fn func()) {
	defer func() { _ = recover() }()
	fn()
}

// markDirty asks for a status refresh; local changes are also announced
// (STATUS_CHANGED) so every tab re-reads the projection.
func (r *Runtime) markDirty(local bool) {
	r.mu.Lock()
	if local {
		r.dirtyLocal = true
	} else {
		r.dirtyRemote = true
	}
	r.mu.Unlock()
	select {
	case r.dirtyCh <- struct{}{}:
	default:
	}
}

func (r *Runtime) readStatus(ctx context.Context) (RuntimeStatus, error) {
	p, err := r.ob.Status(ctx)
	if err != nil {
		return RuntimeStatus{}, err
	}
	l, found, err := r.store.GetLease(ctx, r.ob.LockName())
	if err != nil {
		return RuntimeStatus{}, err
	}
	r.mu.Lock()
	st := RuntimeStatus{Projection: p, Owner: r.owning, Flushing: r.flushing, ID: r.id}
	switch {
	case r.owning:
		st.OwnerID, st.LeaseToken, st.FenceToken = r.id, r.lease.Token, r.lease.FenceToken
	case found:
		st.OwnerID, st.LeaseToken = l.Owner, l.Token
		if l.Owner == r.remoteOwner {
			st.FenceToken = r.remoteFence
		}
	}
	r.mu.Unlock()
	return st, nil
}

func (r *Runtime) statusLoop() {
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.dirtyCh:
		}
		// Every read scans the queue: keep reads to a fraction of the
		// time (at least 10x the last read's cost apart), and while this
		// tab flushes, fewer and larger steps still (waiting tabs see
		// progress well within the watchdog's stall time).
		d := r.cfg.StatusDebounce
		r.mu.Lock()
		if c := 10 * r.readCost; c > d {
			d = min(c, 2*time.Second)
		}
		if r.flushing {
			d *= 3
		}
		r.mu.Unlock()
		time.Sleep(d)
		if r.frozen.Load() {
			// No IndexedDB work while frozen; resume marks dirty again.
			continue
		}
		r.mu.Lock()
		local := r.dirtyLocal
		r.dirtyLocal, r.dirtyRemote = false, false
		r.mu.Unlock()
		if local {
			r.post(kindStatusChanged, js.Undefined())
		}
		began := time.Now()
		r.mu.Lock()
		r.readingSince = began
		r.mu.Unlock()
		select {
		case r.wdWake <- struct{}{}:
		default:
		}
		st, err := r.readStatus(r.ctx)
		r.mu.Lock()
		r.readingSince = time.Time{}
		r.mu.Unlock()
		if err != nil {
			continue
		}
		r.mu.Lock()
		r.readCost = time.Since(began)
		resumed := r.last.Paused && !st.Paused
		r.last = st
		due := hasDueWork(st.Projection) && r.contended
		act := r.wd.Observe(time.Now(), progressMark(st.Projection), st.LastAckAt, st.OldestPendingAt, due, r.owning)
		subs := make([]func(RuntimeStatus), 0, len(r.subs.status))
		for _, fn := range r.subs.status {
			subs = append(subs, fn)
		}
		r.mu.Unlock()
		if resumed {
			// Attempts were skipped while paused (see attempt).
			r.Kick("resumed")
		}
		r.watchAct(act)
		select {
		case r.wdWake <- struct{}{}:
		default:
		}
		for _, fn := range subs {
			safeCall(func() { fn(st) })
		}
	}
}
