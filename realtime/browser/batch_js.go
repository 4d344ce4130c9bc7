//go:build js && wasm

package browser

import (
	"context"
	"errors"
	"strconv"
	"syscall/js"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/realtime"
)

// appBatch performs a batch of the driver's app actions in order. A run
// of deltas and outcomes (acks, rejects) is written in one fenced
// transaction and then announced message by message, in order (write,
// then announce), so the messages that queued while a transaction ran
// cost one commit, not one each: a resend's acks arrive interleaved with
// the deltas the mutations made. It reports whether a replica write
// failed; the rest of the batch is then not performed (the driver goes
// back to the version the replica holds).
func (lr *leaderRun) appBatch(acts []realtime.Action) (failed bool) {
	for len(acts) > 0 {
		n := 0
		for n < len(acts) && isWrite(acts[n]) {
			n++
		}
		if n == 0 {
			failed = lr.app(acts[0])
			n = 1
		} else {
			failed = lr.failed(lr.write(lr.l.Ctx, acts[:n]))
		}
		if failed {
			lr.unsettle(acts)
			return true
		}
		acts = acts[n:]
	}
	return false
}

// unsettle hands the machine again the mutations whose outcomes were in a
// failed (rolled back) or skipped part of a batch: the machine already
// forgot them, their rows stay in the pending store, and nothing else
// would resend them while this leader lasts. The next ready resends them;
// the server answers with the stored outcome.
func (lr *leaderRun) unsettle(acts []realtime.Action) {
	var ids map[string]bool
	for _, a := range acts {
		if v, ok := a.(realtime.Settled); ok {
			if ids == nil {
				ids = map[string]bool{}
			}
			ids[v.ID] = true
		}
	}
	if ids == nil {
		return
	}
	lr.c.mu.Lock()
	list := lr.c.pend.List()
	lr.c.mu.Unlock()
	for _, m := range list {
		if ids[m.ID] {
			go lr.mutate(m) // the driver's goroutine is ours: hand it over later
		}
	}
}

func isWrite(a realtime.Action) bool {
	switch a.(type) {
	case realtime.Deliver, realtime.Settled:
		return true
	}
	return false
}

// failed handles an app action's error: a stale leader steps down; any
// other error is the status's last error. It reports whether the replica
// lacks what it was handed (not a delta stored without its bad changes,
// nor a stale leader, which steps down).
func (lr *leaderRun) failed(err error) bool {
	if errors.Is(err, errStale) {
		lr.l.StepDown(errStale)
		return false
	} else if err != nil {
		lr.mu.Lock()
		lr.lastErr = errorWords(err)
		lr.mu.Unlock()
	}
	return err != nil && !errors.Is(err, ErrChanges)
}

// write stores a run of deltas (consecutive, in version order) and
// outcomes in one fenced transaction: the deltas' changes and the version
// row, the outcomes' removal from the pending store. Then it announces
// each, in order, and tells this tab's own listeners and waiters (a
// BroadcastChannel does not deliver to its sender). The fence's operation
// is the last version, or for outcomes alone the one id ("s"+id) or a
// fresh one.
func (lr *leaderRun) write(ctx context.Context, acts []realtime.Action) error {
	c := lr.c
	w := runOf(c, acts)
	op, seq := w.op()
	var stores []string
	if w.last != 0 {
		stores = lr.replicaStores()
	}
	if len(w.settled) > 0 {
		stores = append(stores, StorePending)
	}
	commit := func(ctx context.Context) error {
		if err := lr.fenced(ctx, op, seq, stores, w.writes); err != nil {
			return err
		}
		for _, id := range w.settled {
			if err := c.settleHook(id); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	for i := range w.kinds {
		if i == 0 {
			_, err = c.ch.Announce(ctx, lr.seq, commit, w.kinds[0], w.payloads[0])
		} else if err == nil {
			_, err = c.ch.Send(lr.seq, w.kinds[i], w.payloads[i])
		}
	}
	if err != nil {
		return err
	}
	if w.last != 0 {
		c.mu.Lock()
		c.fol.Loaded(w.last)
		c.mu.Unlock()
	}
	for _, a := range acts {
		switch v := a.(type) {
		case realtime.Deliver:
			c.deltas.call(v.Delta)
		case realtime.Settled:
			c.settle(v.ID, v.Outcome)
		}
	}
	c.notify.kick()
	return w.perr
}

// run is a batch's transaction and announcements.
type run struct {
	deltas   []runDelta
	settled  []string
	last     uint64 // the last delta's version; 0: outcomes only
	kinds    []string
	payloads []js.Value
	perr     error // a delta whose changes nobody can apply
}

func runOf(c *Conn, acts []realtime.Action) *run {
	w := &run{}
	for i, a := range acts {
		switch v := a.(type) {
		case realtime.Deliver:
			d := v.Delta
			ch, err := parseChanges(d.Changes, c.cfg.Stores)
			if err != nil {
				// The server's stream moved on past it; nobody can apply
				// it. Keep the version (followers see no gap) and say so.
				c.badChanges.Add(1)
				ch, d.Changes, w.perr = nil, []byte("[]"), err
				acts[i] = realtime.Deliver{Delta: d}
			}
			w.deltas = append(w.deltas, runDelta{ch, d.Version})
			w.last = d.Version
			p := js.Global().Get("Object").New()
			p.Set("version", float64(d.Version))
			p.Set("prev", float64(d.Prev))
			p.Set("changes", string(d.Changes))
			w.kinds, w.payloads = append(w.kinds, "rt.delta"), append(w.payloads, p)
		case realtime.Settled:
			w.settled = append(w.settled, v.ID)
			w.kinds, w.payloads = append(w.kinds, "rt.settled"), append(w.payloads, encodeOutcome(v.ID, v.Outcome))
		}
	}
	return w
}

// runDelta is one delta of a run: its changes and version.
type runDelta struct {
	changes []change
	version uint64
}

// op is the fenced operation of the run. Deltas are not deduplicated by
// the fence (its sequence outlives a server reset to a lower version): a
// fresh id, and writes checks the replica's own version row.
func (w *run) op() (string, uint64) {
	switch {
	case w.last != 0:
		return deliverOp(w.last), 0
	case len(w.settled) == 1:
		return "s" + w.settled[0], 0
	}
	return "s" + strconv.Itoa(len(w.settled)) + "-" + channel.NewID(), 0
}

// writes stores the run in the fenced transaction: each delta the replica
// does not hold yet (its version row says; a delta sent again after a
// failed announce is skipped), the version row, the settled mutations'
// removal from the pending store.
func (w *run) writes(tx *idb.WriteTx) error {
	for _, id := range w.settled {
		if err := tx.Delete(StorePending, js.ValueOf(id)); err != nil {
			return err
		}
	}
	if len(w.deltas) == 0 {
		return nil
	}
	held, err := storedVersion(tx)
	if err != nil {
		return err
	}
	for _, d := range w.deltas {
		if d.version <= held {
			continue
		}
		if err := writeChanges(tx, d.changes); err != nil {
			return err
		}
	}
	if w.last > held {
		return putVersion(tx, w.last)
	}
	return nil
}
