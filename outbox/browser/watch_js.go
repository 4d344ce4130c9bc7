//go:build js && wasm

package browser

import (
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/outbox/idbstore"
)

// watchLoop runs the watchdog's timers. It never waits on IndexedDB: a
// frozen owner may hold a transaction open that blocks every read of the
// queue, and that is exactly when the watchdog must still act.
func (r *Runtime) watchLoop() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		r.mu.Lock()
		wake := r.wd.NextWake()
		blocked := !r.readingSince.IsZero() && r.contended && !r.owning
		if blocked && !r.wd.Armed() {
			// A status read is outstanding while another tab holds the
			// lock: if it is still blocked after StallAfter, suspect.
			if w := r.readingSince.Add(r.wd.Config().StallAfter); wake.IsZero() || w.Before(wake) {
				wake = w
			}
		}
		r.mu.Unlock()
		if wake.IsZero() {
			t.Stop()
		} else {
			d := time.Until(wake)
			if d < 0 {
				d = 0
			}
			t.Reset(d)
		}
		select {
		case <-r.ctx.Done():
			return
		case <-r.wdWake:
			continue
		case <-t.C:
		}
		r.mu.Lock()
		now := time.Now()
		var act watchAction
		if since := r.readingSince; !since.IsZero() && r.contended && !r.owning && now.Sub(since) >= r.wd.Config().StallAfter {
			act = r.wd.Suspect(now, since)
		} else {
			act = r.wd.Tick(now)
		}
		r.mu.Unlock()
		r.watchAct(act)
	}
}

func (r *Runtime) watchAct(act watchAction) {
	if r.cfg.Passive {
		return // a worker asks no owner and steals from none
	}
	switch act {
	case watchAsk:
		r.post(kindStatusAsk, js.Undefined())
	case watchSteal:
		r.requestSteal()
	}
}

// abortTxns aborts this runtime's open transactions of the flush path (the
// ones over the lease or the metadata store, and every readonly one): what
// the page's freeze event aborts too (idb's freeze tracker, see
// Open).
func (r *Runtime) abortTxns() {
	if st, ok := r.store.(*idbstore.Store); ok {
		st.AbortOpen()
	}
}

// ---- flushing ----
