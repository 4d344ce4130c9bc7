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
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// appBatch performs a batch of the driver's app actions in order: a run
// of deltas is written in one fenced transaction and a run of outcomes
// removed in another, each then announced message by message (write,
// then announce), so messages that queued while a transaction ran cost
// one commit, not one each.
func (lr *leaderRun) appBatch(acts []realtime.Action) {
	for len(acts) > 0 {
		n := 1
		switch acts[0].(type) {
		case realtime.Deliver:
			for n < len(acts) && isDeliver(acts[n]) {
				n++
			}
			ds := make([]rt.Delta, n)
			for i := range ds {
				ds[i] = acts[i].(realtime.Deliver).Delta
			}
			lr.failed(lr.deliver(lr.l.Ctx, ds))
		case realtime.Settled:
			for n < len(acts) && isSettled(acts[n]) {
				n++
			}
			ss := make([]realtime.Settled, n)
			for i := range ss {
				ss[i] = acts[i].(realtime.Settled)
			}
			lr.failed(lr.settled(lr.l.Ctx, ss))
		default:
			lr.app(acts[0])
		}
		acts = acts[n:]
	}
}

func isDeliver(a realtime.Action) bool { _, ok := a.(realtime.Deliver); return ok }
func isSettled(a realtime.Action) bool { _, ok := a.(realtime.Settled); return ok }

// failed handles an app action's error: a stale leader steps down; any
// other error is the status's last error.
func (lr *leaderRun) failed(err error) {
	if errors.Is(err, errStale) {
		lr.l.StepDown(errStale)
	} else if err != nil {
		lr.mu.Lock()
		lr.lastErr = err.Error()
		lr.mu.Unlock()
	}
}

// deliver writes deltas (consecutive, in version order) to the replica
// with the version row in one fenced transaction, then announces each,
// then tells this tab's own listeners (a BroadcastChannel does not
// deliver to its sender). The fence's operation is the last version.
func (lr *leaderRun) deliver(ctx context.Context, ds []rt.Delta) error {
	c := lr.c
	var changes []change
	var perr error
	ps := make([]js.Value, len(ds))
	for i := range ds {
		ch, err := parseChanges(ds[i].Changes, c.cfg.Stores)
		if err != nil {
			// The server's stream moved on past it; nobody can apply it.
			// Keep the version (followers see no gap) and say so.
			c.badChanges.Add(1)
			ch, ds[i].Changes, perr = nil, []byte("[]"), err
		}
		changes = append(changes, ch...)
		p := js.Global().Get("Object").New()
		p.Set("version", float64(ds[i].Version))
		p.Set("prev", float64(ds[i].Prev))
		p.Set("changes", string(ds[i].Changes))
		ps[i] = p
	}
	last := ds[len(ds)-1].Version
	_, err := c.ch.Announce(ctx, lr.seq, func(ctx context.Context) error {
		return lr.fenced(ctx, opVersion(last), last, lr.replicaStores(), func(tx *idb.WriteTx) error {
			if err := writeChanges(tx, changes); err != nil {
				return err
			}
			return putVersion(tx, last)
		})
	}, "rt.delta", ps[0])
	for _, p := range ps[1:] {
		if err == nil {
			_, err = c.ch.Send(lr.seq, "rt.delta", p)
		}
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.fol.Loaded(last)
	c.mu.Unlock()
	for _, d := range ds {
		c.deltas.call(d)
	}
	c.notify.kick()
	return perr
}

// settled removes mutations from the pending store in one fenced
// transaction, announces each outcome to every tab, and settles them here.
func (lr *leaderRun) settled(ctx context.Context, ss []realtime.Settled) error {
	c := lr.c
	op := "s" + ss[0].ID
	if len(ss) > 1 {
		op = "s" + strconv.Itoa(len(ss)) + "-" + channel.NewID()
	}
	_, err := c.ch.Announce(ctx, lr.seq, func(ctx context.Context) error {
		return lr.fenced(ctx, op, 0, []string{StorePending}, func(tx *idb.WriteTx) error {
			for _, s := range ss {
				if err := tx.Delete(StorePending, js.ValueOf(s.ID)); err != nil {
					return err
				}
			}
			return nil
		})
	}, "rt.settled", encodeOutcome(ss[0].ID, ss[0].Outcome))
	for _, s := range ss[1:] {
		if err == nil {
			_, err = c.ch.Send(lr.seq, "rt.settled", encodeOutcome(s.ID, s.Outcome))
		}
	}
	if err != nil {
		return err
	}
	for _, s := range ss {
		c.settle(s.ID, s.Outcome)
	}
	return nil
}
