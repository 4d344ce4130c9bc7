package sim

import (
	"context"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// calmDown heals the world (network, server, auth, frozen and dead tabs),
// lets stale flushes finish, then drains each user's queue; the app retries
// dead letters and discards conflicts and terminal failures, as a user would.
// Whatever is left must be acked.
func (w *World) calmDown() {
	ctx := context.Background()
	w.calm = true
	w.srv.StormUntil = time.Time{}
	if w.offline {
		w.online()
	}
	clear(w.srv.AuthExpired)
	w.tracef("calm")
	for _, t := range w.tabs {
		t.frozen = false
		for i := 0; t.flushing && i < 100000; i++ {
			w.resume(t)
		}
		if !t.alive {
			w.start(t)
		}
	}
	for _, u := range w.users {
		w.user = u
		sw := w.tabs[w.rng.IntN(len(w.tabs))]
		_, _ = sw.ob.Logout(ctx, false)
		s, _ := sw.ob.Login(ctx, outbox.Session{UserID: u})
		w.announceSession(sw, s, 1)
		_ = w.tabs[0].ob.Resume(ctx)
		drained := false
		for round := 0; round < 200 && !drained && len(w.failed) == 0; round++ {
			w.advance(5 * time.Second) // past any lease and backoff
			t := w.tabs[w.rng.IntN(len(w.tabs))]
			w.trigger(t, "calm")
			for i := 0; t.flushing && i < 100000; i++ {
				w.resume(t)
			}
			recs, _ := w.store.List(ctx, outbox.Filter{UserID: u})
			open := 0
			for _, r := range recs {
				switch {
				case r.Status == queue.StatusDeadLetter:
					_ = t.ob.Retry(ctx, r.ID)
					open++
				case r.Status.Blocking():
					if err := t.ob.Discard(ctx, r.ID); err == nil {
						w.enq[r.ID].gone = "discarded"
						w.stats.Discarded++
					}
					open++
				case r.Status != queue.StatusAcked:
					open++
				}
			}
			drained = open == 0
		}
		if !drained && len(w.failed) == 0 {
			recs, _ := w.store.List(ctx, outbox.Filter{UserID: u})
			for _, r := range recs {
				if r.Status != queue.StatusAcked {
					w.violation("stuck: %s of %s is %s after the calm phase (attempts %d, deps %v)", r.ID, u, r.Status, r.Attempts, r.DependencyIDs)
					break
				}
			}
		}
	}
}

// check verifies the end-state invariants.
func (w *World) check() {
	ctx := context.Background()
	byKey := map[string][]int{} // user+key -> effect indexes
	at := map[string]int{}      // record id -> first effect index
	for i, e := range w.srv.Effects {
		k := e.User + "\x00" + e.Key
		byKey[k] = append(byKey[k], i)
		if _, ok := at[e.RecordID]; !ok {
			at[e.RecordID] = i
		}
		in, ok := w.enq[e.RecordID]
		if !ok {
			w.violation("effect %d for unknown record %s", i, e.RecordID)
			continue
		}
		if in.user != e.User {
			w.violation("session boundary: %s of %s applied as %s", e.RecordID, in.user, e.User)
		}
		if in.key != e.Key {
			w.violation("record %s applied under key %s, not its own", e.RecordID, e.Key)
		}
		if i > 0 && e.Token < w.srv.Effects[i-1].Token {
			w.violation("server accepted a lower fencing token %d after %d", e.Token, w.srv.Effects[i-1].Token)
		}
	}
	for id, in := range w.enq {
		n := len(byKey[in.user+"\x00"+in.key])
		if n > 1 {
			w.violation("record %s has %d effects (at most one allowed)", id, n)
		}
		if in.gone != "" {
			if _, err := w.store.Get(ctx, id); err == nil {
				w.violation("%s record %s still present", in.gone, id)
			}
			continue
		}
		r, err := w.store.Get(ctx, id)
		if err != nil {
			w.violation("lost: record %s vanished silently", id)
			continue
		}
		if r.Status != queue.StatusAcked {
			w.violation("record %s ended %s, not acked nor visibly resolved", id, r.Status)
			continue
		}
		w.stats.Acked++
		if n != 1 {
			w.violation("acked record %s has %d effects, want exactly 1", id, n)
			continue
		}
		e := w.srv.Effects[byKey[in.user+"\x00"+in.key][0]]
		if e.Hash != r.PayloadHash || e.Hash != in.hash {
			w.violation("record %s: server applied another payload than the final one", id)
		}
	}
	// Per-entity order and dependencies, among records that were not
	// discarded or purged (a discarded record may have been applied late).
	last := map[string]uint64{}
	for i, e := range w.srv.Effects {
		in := w.enq[e.RecordID]
		if in == nil || in.gone != "" {
			continue
		}
		if in.seq <= last[in.entity] {
			w.violation("entity order: %s (seq %d) applied after seq %d", e.RecordID, in.seq, last[in.entity])
		}
		last[in.entity] = in.seq
		for _, d := range in.deps {
			din := w.enq[d]
			if din == nil || din.gone != "" {
				continue
			}
			if j, ok := at[d]; !ok || j > i {
				w.violation("dependency: %s applied before its dependency %s", e.RecordID, d)
			}
		}
	}
}
