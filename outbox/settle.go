package outbox

import (
	"context"
	"errors"

	"github.com/tabfence/tabfence/outbox/queue"
)

// settleOp is a transition of a sent record under the lease, with what to
// count and emit once it committed.
type settleOp struct {
	rec  queue.Record
	ev   Event
	kind EventKind
	e    *queue.ErrorInfo
	t    func(queue.Record) (queue.Record, error)
}

// update is op as a RecordUpdate; *ok (if ok != nil) is set when the
// transition was made (it commits with the rest of the batch).
func (op *settleOp) update(ok *bool) RecordUpdate {
	return RecordUpdate{ID: op.rec.ID, Fn: func(r *queue.Record) error {
		n, err := op.t(*r)
		if err != nil {
			return err
		}
		*r = n
		if ok != nil {
			*ok = true
		}
		return nil
	}}
}

// settle writes a transition under the lease, then counts and emits it. The
// write happens even when ctx is done (the answer arrived; recording it is
// what keeps a retry from being needed). A missing record is not an error.
func (f *flushRun) settle(ctx context.Context, rec queue.Record, ev Event, kind EventKind, e *queue.ErrorInfo, t func(queue.Record) (queue.Record, error)) error {
	return f.settleOps(ctx, []*settleOp{{rec: rec, ev: ev, kind: kind, e: e, t: t}})
}

// settleOps writes ops in one transaction, as settle does one, then counts
// and emits each (settled); the first error is returned.
func (f *flushRun) settleOps(ctx context.Context, ops []*settleOp) error {
	ups := make([]RecordUpdate, len(ops))
	for i, op := range ops {
		ups[i] = op.update(nil)
	}
	res, err := f.commit(context.WithoutCancel(ctx), ups)
	if err != nil {
		return err
	}
	var first error
	for i, op := range ops {
		if err := f.settled(op, res[i]); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// settled counts and emits a committed settle (res is its UpdateResult).
// A missing record is not an error.
func (f *flushRun) settled(op *settleOp, res UpdateResult) error {
	o := f.o
	if errors.Is(res.Err, ErrNotFound) {
		return nil
	}
	if res.Err != nil {
		return res.Err
	}
	n, kind, ev, e := res.Record, op.kind, op.ev, op.e
	if n.Status == queue.StatusDeadLetter {
		kind = EventDeadLetter
	}
	ev.Kind, ev.At = kind, o.cfg.Clock.Now()
	if e != nil {
		ev.ErrorCode = e.Code
	}
	f.mu.Lock()
	f.health.Observe(e, &n)
	f.mu.Unlock()
	f.count(func(r *FlushReport) {
		switch n.Status {
		case queue.StatusAcked:
			r.Acked++
		case queue.StatusFailed:
			r.Retried++
		case queue.StatusDeadLetter:
			r.DeadLettered++
		case queue.StatusTerminalFailed:
			r.Terminal++
		case queue.StatusConflict:
			r.Conflicts++
		}
	}, e)
	o.emit(ev)
	return nil
}

// apply adapts a pure transition to a Store update function.
func apply(t func(queue.Record) (queue.Record, error)) func(*queue.Record) error {
	return func(r *queue.Record) error {
		n, err := t(*r)
		if err != nil {
			return err
		}
		*r = n
		return nil
	}
}
