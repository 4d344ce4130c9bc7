package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/tabfence/tabfence/outbox/queue"
)

// errSkipped: a record change of a batch that was not made because the one
// it depends on (the previous record's ack) was not.
var errSkipped = errors.New("outbox: skipped: the previous record of the entity was not settled")

// charge commits, in ONE transaction, the deferred acks of the lane's
// records (acks, may be empty) and MarkSending of next (one step of
// runLane): every attempt is charged, durably, before its record is handed
// to the transport, and no record is charged when an ack of the same
// transaction was not made. Acks may trail the sends by up to two steps
// (runLane charges a step ahead): a new owner after a takeover finds those
// records in flight, sends them again first, in order, and the receiver
// answers with the stored responses (the idempotency keys), so per-entity
// order holds across a takeover. It returns the charged records, a prefix
// of next: charging stops at the first record that cannot be charged
// (purged by a logout, an ack not made, the flush ending), which the lane
// hands back with the rest. err is fatal for the flush.
//
// A crash leaves charged the records of the steps not yet sent: at most
// ChargeAhead-1 attempts counted that were never made (none with
// ChargeAhead 1). Never fewer: a record that crashes the tab each time it
// is sent is charged each time and reaches dead letter.
//
// Durability: like every state transition (see idbstore.Open) the step uses
// the browser's default durability, not Enqueue's strict one. A tab or
// browser crash never undoes a committed step. An OS crash or power loss
// may undo the last steps: an undone ack is replayed harmlessly (the
// idempotency key), and an undone charge costs at most the uncounted sends
// of the records that were in flight at that moment.
func (f *flushRun) charge(ctx context.Context, acks []*settleOp, next []queue.Record) (charged []queue.Record, err error) {
	now := f.o.cfg.Clock.Now()
	ups, acked, cctx := ackUpdates(ctx, acks, len(next))
	contiguous := true // the store runs the Fns in order, once each
	for _, rec := range next {
		ups = append(ups, f.chargeUpdate(ctx, rec, now, &contiguous, acked))
	}
	res, err := f.commit(cctx, ups)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, nil // the flush is ending: the lane hands its records back
		}
		return nil, err
	}
	if err := f.settleAcks(acks, res); err != nil {
		return nil, err
	}
	for _, m := range res[len(acks):] {
		if m.Err == nil {
			charged = append(charged, m.Record)
			continue
		}
		if chargeStops(ctx, m.Err) {
			return charged, nil
		}
		return charged, m.Err
	}
	return charged, nil
}

// chargeUpdate is the Take update that charges rec, which the claim
// planned (queue.Charge). The store runs a transaction's Fns in order, so
// *chain says whether every record before rec in its entity's chain was
// charged, and acked (if not nil) whether the acks it depends on were
// made: when either is false rec is skipped (errSkipped), and when its own
// charge fails it breaks the chain for the records after it.
func (f *flushRun) chargeUpdate(ctx context.Context, rec queue.Record, now time.Time, chain *bool, acked func() bool) RecordUpdate {
	l, ttl, reconnected, sess, gate := f.lease, f.o.cfg.LeaseTTL, f.o.reconnectedAt(), f.session, f.o.SchemaGate()
	return RecordUpdate{ID: rec.ID, Take: true, Fn: apply(func(r queue.Record) (queue.Record, error) {
		if acked != nil && !acked() {
			*chain = false
		}
		if !*chain {
			return r, errSkipped
		}
		if err := ctx.Err(); err != nil {
			*chain = false
			return r, err
		}
		// The claim planned r; what the plan checked of it that
		// another tab can change meanwhile (an enqueue that replaced
		// its payload) is checked again here.
		if r.UserID != sess.UserID || r.TenantID != sess.TenantID || gate.Action(&r) == queue.SchemaUnsupported {
			*chain = false
			return r, queue.OpError("charge", "record no longer fits the claim", queue.ErrInvalidTransition)
		}
		n, err := queue.Charge(r, l, now, ttl, reconnected)
		if err != nil {
			*chain = false
		}
		return n, err
	})}
}

// chargeStops reports whether a record's failed charge (err) only stops its
// entity's chain there, its records handed back: it was purged by a logout
// meanwhile, a record or ack before it was not made, it changed since the
// claim planned it, or the flush is ending. Any other error fails the flush.
func chargeStops(ctx context.Context, err error) bool {
	return errors.Is(err, ErrNotFound) ||
		errors.Is(err, errSkipped) ||
		errors.Is(err, queue.ErrInvalidTransition) ||
		(ctx.Err() != nil && errors.Is(err, ctx.Err()))
}

// ackUpdates begins a charge transaction with acks, deferred acks of
// earlier sends (may be empty), room for more updates after them. acked
// reports, as the store runs the later Fns, whether every ack was made.
// cctx is the transaction's context: the acks are written even when ctx is
// done (the answers arrived), the charges are not (chargeUpdate checks).
func ackUpdates(ctx context.Context, acks []*settleOp, more int) (ups []RecordUpdate, acked func() bool, cctx context.Context) {
	oks := make([]bool, len(acks))
	ups = make([]RecordUpdate, 0, len(acks)+more)
	cctx = ctx
	for i, a := range acks {
		ups = append(ups, a.update(&oks[i]))
		cctx = context.WithoutCancel(ctx)
	}
	return ups, func() bool {
		for _, ok := range oks {
			if !ok {
				return false
			}
		}
		return true
	}, cctx
}

// settleAcks counts and emits the acks that began a committed charge
// transaction (res: its results).
func (f *flushRun) settleAcks(acks []*settleOp, res []UpdateResult) error {
	for i, a := range acks {
		if err := f.settled(a, res[i]); err != nil {
			return err
		}
	}
	return nil
}
