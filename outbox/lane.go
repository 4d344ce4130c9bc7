package outbox

import (
	"context"

	"github.com/tabfence/tabfence/outbox/queue"
)

// runLane sends one entity's records in order. Records are charged in
// steps, and the acks of the records sent since a step are written in a
// later step's transaction: one transaction per step on the lane's path
// instead of one per record. No record leaves before its charge is
// durable, nor before its predecessor's answer arrived; a predecessor that
// was not acked stops the lane, and the charged records behind it are taken
// back unsent.
//
// With ChargeAhead 2 or more the lane works a step ahead: a step is
// ChargeAhead/2 records, and the next step is charged, with the acks of the
// step before, while this one is sent. Its transaction then runs while the
// requests are on the network rather than between two of them
// (docs/outbox-notes.md).
// Charged but unsent records still never exceed ChargeAhead-1. ChargeAhead 1
// is the exact mode: a record is charged only with the ack of the one
// before it. With Concurrency 1 the step ahead is charged just before the
// step's first send instead of during it: the same states, without a
// goroutine (the simulation's determinism).
func (f *flushRun) runLane(ctx context.Context, lane []queue.Record) {
	ahead := max(f.o.cfg.ChargeAhead, 1)
	size, pipelined := ahead, ahead >= 2
	if pipelined {
		size = ahead / 2
	}
	i := 0 // lane[i:] is not asked for yet
	ask := func(acks []*settleOp) *laneStep {
		k := min(size, len(lane)-i)
		st := f.startCharge(ctx, acks, lane[i:i+k])
		i += k
		return st
	}
	var acks []*settleOp // sent and acked, not yet written
	pend := ask(nil)
	for {
		charged, short := f.take(pend)
		pend = nil
		if len(charged) == 0 {
			// The step charged nothing: the lane ends, its records
			// untouched (a claim writes nothing for them).
			f.wrapUp(ctx, acks, nil, lane[i:])
			return
		}
		if pipelined && !short && i < len(lane) && !f.ending(ctx) {
			pend = ask(acks)
			acks = nil
		}
		stop := short
		for len(charged) > 0 {
			if f.ending(ctx) {
				stop = true
				break
			}
			rec := charged[0]
			charged = charged[1:]
			next, err := f.send(ctx, rec)
			if err != nil {
				f.fail(err)
			}
			if next == nil {
				stop = true
				break
			}
			acks = append(acks, next)
		}
		if pend != nil {
			if stop {
				more, _ := f.take(pend)
				f.wrapUp(ctx, acks, append(charged, more...), lane[i:])
				return
			}
			continue
		}
		if stop || i >= len(lane) {
			f.wrapUp(ctx, acks, charged, lane[i:])
			return
		}
		pend = ask(acks) // the exact mode's next step
		acks = nil
	}
}

// laneStep is one charge step of a lane (flushRun.charge of want records),
// made inline or in flight on a goroutine (done).
type laneStep struct {
	want int
	got  []queue.Record
	err  error
	done chan struct{}
}

// startCharge starts charging next with acks (flushRun.charge). With
// Concurrency 1 it charges inline; otherwise the step runs on a goroutine
// and take waits for it.
func (f *flushRun) startCharge(ctx context.Context, acks []*settleOp, next []queue.Record) *laneStep {
	st := &laneStep{want: len(next)}
	if f.o.cfg.Concurrency <= 1 {
		st.got, st.err = f.charge(ctx, acks, next)
		return st
	}
	st.done = make(chan struct{})
	go func() {
		defer close(st.done)
		st.got, st.err = f.charge(ctx, acks, next)
	}()
	return st
}

// take waits for st and returns what it charged; the records it was asked
// for and did not charge are released. short: it charged fewer, or failed
// (the flush is failed with its error).
func (f *flushRun) take(st *laneStep) (charged []queue.Record, short bool) {
	if st.done != nil {
		<-st.done
	}
	if st.err != nil {
		f.fail(st.err)
	}
	f.released(st.want - len(st.got))
	return st.got, len(st.got) < st.want || st.err != nil
}

// wrapUp ends a lane in one transaction (writeBack): the acks not yet
// written, and the charges of records it will not send taken back. The
// records it did not charge are left as they are: the claim only planned
// them.
func (f *flushRun) wrapUp(ctx context.Context, acks []*settleOp, unsent, rest []queue.Record) {
	f.released(len(rest))
	f.writeBack(ctx, acks, unsent)
}

// writeBack writes ops and takes back unsent (charged but never handed to
// the transport: Unsend) in one transaction, even when ctx is done; it
// counts and emits each op (settled) and counts the unsent as released.
// It returns the ops' results; nil when the write failed, which fails the
// flush.
func (f *flushRun) writeBack(ctx context.Context, ops []*settleOp, unsent []queue.Record) []UpdateResult {
	res, err := f.writeBackErr(ctx, ops, unsent)
	if err != nil {
		f.fail(err)
	}
	return res
}

// writeBackErr is writeBack returning its error instead of failing the
// flush with it (endAfter decides which error ends the flush).
func (f *flushRun) writeBackErr(ctx context.Context, ops []*settleOp, unsent []queue.Record) ([]UpdateResult, error) {
	if len(ops)+len(unsent) == 0 {
		return nil, nil
	}
	now := f.o.cfg.Clock.Now()
	ups := make([]RecordUpdate, 0, len(ops)+len(unsent))
	for _, a := range ops {
		ups = append(ups, a.update(nil))
	}
	for i := range unsent {
		ups = append(ups, RecordUpdate{ID: unsent[i].ID, Fn: apply(func(r queue.Record) (queue.Record, error) { return queue.Unsend(r, f.lease, now) })})
	}
	res, err := f.commit(context.WithoutCancel(ctx), ups)
	if err != nil {
		return nil, err
	}
	for i, a := range ops {
		if serr := f.settled(a, res[i]); serr != nil && err == nil {
			err = serr
		}
	}
	n := 0
	for _, u := range res[len(ops):] {
		if u.Err == nil {
			n++
		}
	}
	f.released(n)
	return res[:len(ops)], err
}

// released counts n claimed records a lane did not send as released. The
// ones it did not charge cost no write: the claim only planned them, and
// they are still waiting.
func (f *flushRun) released(n int) {
	if n > 0 {
		f.count(func(r *FlushReport) { r.Released += n }, nil)
	}
}
