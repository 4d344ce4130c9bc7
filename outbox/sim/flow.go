package sim

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// trigger is a flush hint (online, visible, focus, OUTBOX_CHANGED, timer):
// the lock dedupes it. With Web Locks the tab asks with ifAvailable and may
// steal from a holder that made no progress for 1.5 s (frozen); without, it
// takes the IndexedDB lease only if unexpired.
func (w *World) trigger(t *Tab, why string) {
	if !t.alive || t.flushing {
		return
	}
	ctx := context.Background()
	var lease queue.Lease
	var err error
	if w.webLocks {
		if w.holder != nil && w.holder != t {
			stalled := w.holder.frozen && w.now.Sub(w.holderSince) > 1500*time.Millisecond
			if !stalled || !w.chance(0.7) {
				t.ob.SkippedLocked(t.owner, why)
				return
			}
			w.stats.Steals++
			w.tracef("%s steals the lock from %s", t.owner, w.holder.owner)
		}
		w.holder, w.holderSince = t, w.now
		lease, err = t.ob.Acquire(ctx, t.owner, true)
	} else {
		lease, err = t.ob.Acquire(ctx, t.owner, false)
		if errors.Is(err, queue.ErrLeaseHeld) {
			t.ob.SkippedLocked(t.owner, why)
			return
		}
	}
	if err != nil {
		w.violation("acquire: %v", err)
		return
	}
	lease.Resource, lease.FenceToken = resource, w.srv.Issue(resource)
	t.lease = lease
	w.stats.Flushes++
	w.tracef("%s flushes with token %d fence %d", t.owner, lease.Token, lease.FenceToken)
	seq := func(yield func(struct{}) bool) {
		t.yield = yield
		t.sends = 0
		rep, err := t.ob.Flush(context.Background(), lease)
		if !t.killed && rep.Requests != t.sends {
			w.violation("%s flush reported %d requests, it sent %d", t.owner, rep.Requests, t.sends)
		}
		if errors.Is(err, queue.ErrStaleOwner) || errors.Is(err, outbox.ErrStepDown) {
			w.stats.StaleRejected++
		}
		if err != nil && !errors.Is(err, errCrashed) {
			w.tracef("%s flush ended: %v", t.owner, err)
		}
		if !w.webLocks && !t.killed {
			_ = t.ob.Release(context.Background(), lease)
		}
	}
	t.next, t.stop = iter.Pull(seq)
	t.flushing = true
	w.resume(t)
}

// resume runs t's flush to its next yield point.
func (w *World) resume(t *Tab) {
	if !t.flushing {
		return
	}
	t.inCoro = true
	_, ok := t.next()
	t.inCoro = false
	if !ok {
		w.flushDone(t)
	}
}

func (w *World) flushDone(t *Tab) {
	t.flushing = false
	t.stop()
	if w.holder == t {
		w.holder = nil // the Web Lock callback returned
	}
}

// crash kills t at its current yield point, as a closed or crashed tab: its
// Web Lock is released by the browser, its lease only expires.
func (w *World) crash(t *Tab) {
	if !t.alive {
		return
	}
	w.stats.Crashes++
	w.tracef("%s crashes (flushing=%v)", t.owner, t.flushing)
	t.alive = false
	if t.flushing {
		t.inCoro = true
		t.stop() // the parked yield returns false: every later call fails
		t.inCoro = false
		t.flushing = false
	}
	t.killed = true
	if w.holder == t {
		w.holder = nil
	}
}

// appResolve is the user acting on the dead-letter list.
func (w *World) appResolve(t *Tab) {
	if !t.alive {
		return
	}
	ctx := context.Background()
	dl, err := t.ob.DeadLetters(ctx)
	if err != nil || len(dl) == 0 {
		return
	}
	r := dl[w.rng.IntN(len(dl))]
	if w.rng.IntN(2) == 0 {
		if err := t.ob.Retry(ctx, r.ID); err == nil {
			w.tracef("%s app retries %s (%s)", t.owner, r.ID, r.Status)
		}
		return
	}
	if err := t.ob.Discard(ctx, r.ID); err == nil {
		w.enq[r.ID].gone = "discarded"
		w.stats.Discarded++
		w.tracef("%s app discards %s (%s)", t.owner, r.ID, r.Status)
	}
}

// switchUser is a switch of user in one tab: the browser's credentials
// (a cookie: w.user) change first, as the server's login answer sets them,
// then that tab logs the outbox out (purging or keeping the old user's
// records) and in as the other user. The queue's session is every tab's;
// the other tabs hear the announcement, or miss it (a message lost to a
// frozen or closing tab) and find out from the store before their next
// claim, or from the receiver's session-mismatch answer.
func (w *World) switchUser(purge bool) {
	ctx := context.Background()
	old := w.user
	next := w.users[0]
	if old == next {
		next = w.users[1]
	}
	w.user = next
	var alive []*Tab
	for _, t := range w.tabs {
		if t.alive {
			alive = append(alive, t)
		}
	}
	var sw *Tab
	gone := old // whose records a purge deletes: the switching tab's user
	if len(alive) > 0 {
		sw = alive[w.rng.IntN(len(alive))]
		gone = sw.ob.Session().UserID
	}
	if purge && gone != "" {
		recs, _ := w.store.List(ctx, outbox.Filter{UserID: gone})
		for _, r := range recs {
			w.enq[r.ID].gone = "purged"
			w.stats.Purged++
		}
	}
	if sw == nil {
		if purge {
			_, _ = w.store.Delete(ctx, outbox.Filter{UserID: old})
		}
		_, _ = w.store.UpdateMeta(ctx, func(m *outbox.Meta) error {
			m.Session, m.SessionHeld = outbox.NextSession(m.Session, outbox.Session{UserID: next}), ""
			return nil
		})
		w.tracef("user %s -> %s (purge=%v) with no tab open", old, next, purge)
		return
	}
	_, _ = sw.ob.Logout(ctx, purge)
	s, _ := sw.ob.Login(ctx, outbox.Session{UserID: next})
	w.tracef("user %s -> %s (purge=%v) in %s", old, next, purge, sw.owner)
	w.announceSession(sw, s, 0.7)
}

// announceSession delivers sw's announcement of session s to each other
// live tab with probability p.
func (w *World) announceSession(sw *Tab, s outbox.Session, p float64) {
	for _, t := range w.tabs {
		if t.alive && t != sw {
			if p >= 1 || w.chance(p) {
				t.ob.NoteSession(s.AuthGeneration)
			} else {
				w.tracef("%s missed the session announcement", t.owner)
			}
		}
	}
}

func firstAlive(ts []*Tab) int {
	for i, t := range ts {
		if t.alive {
			return i
		}
	}
	return -1
}
