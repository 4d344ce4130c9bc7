package outbox

import (
	"context"
	"errors"

	"github.com/tabfence/tabfence/wire"
)

// errSkipped: a record change of a batch that was not made because the one
// it depends on (the previous record's ack) was not.
var errSkipped = errors.New("outbox: skipped: the previous record of the entity was not settled")

// settleOp is a transition of a sent record under the lease, with what to
// count and emit once it committed.
type settleOp struct {
	rec  Record
	ev   Event
	kind EventKind
	e    *ErrorInfo
	t    func(Record) (Record, error)
}

// update is op as a RecordUpdate; *ok (if ok != nil) is set when the
// transition was made (it commits with the rest of the batch).
func (op *settleOp) update(ok *bool) RecordUpdate {
	return RecordUpdate{ID: op.rec.ID, Fn: func(r *Record) error {
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
// Durability: like every state transition (see OpenIDBStore) the step uses
// the browser's default durability, not Enqueue's strict one. A tab or
// browser crash never undoes a committed step. An OS crash or power loss
// may undo the last steps: an undone ack is replayed harmlessly (the
// idempotency key), and an undone charge costs at most the uncounted sends
// of the records that were in flight at that moment.
func (f *flushRun) charge(ctx context.Context, acks []*settleOp, next []Record) (charged []Record, err error) {
	l := f.lease
	now := f.o.cfg.Clock.Now()
	acksOK := make([]bool, len(acks))
	ups := make([]RecordUpdate, 0, len(acks)+len(next))
	cctx := ctx
	for i, a := range acks {
		ups = append(ups, a.update(&acksOK[i]))
		// The acks are written even when ctx is done; the charges are not.
		cctx = context.WithoutCancel(ctx)
	}
	contiguous := true // the store runs the Fns in order, once each
	ttl, reconnected, sess, gate := f.o.cfg.LeaseTTL, f.o.reconnectedAt(), f.session, f.o.SchemaGate()
	for _, rec := range next {
		ups = append(ups, RecordUpdate{ID: rec.ID, Take: true, Fn: apply(func(r Record) (Record, error) {
			for _, ok := range acksOK {
				if !ok {
					contiguous = false
				}
			}
			if !contiguous {
				return r, errSkipped
			}
			if err := ctx.Err(); err != nil {
				contiguous = false
				return r, err
			}
			// The claim planned r; what the plan checked of it that
			// another tab can change meanwhile (an enqueue that replaced
			// its payload) is checked again here.
			if r.UserID != sess.UserID || r.TenantID != sess.TenantID || gate.Action(&r) == SchemaUnsupported {
				contiguous = false
				return r, &opError{op: "charge", detail: "record no longer fits the claim", err: ErrInvalidTransition}
			}
			n, err := Charge(r, l, now, ttl, reconnected)
			if err != nil {
				contiguous = false
			}
			return n, err
		})})
	}
	res, err := f.commit(cctx, ups)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, nil // the flush is ending: the lane hands its records back
		}
		return nil, err
	}
	for i, a := range acks {
		if err := f.settled(a, res[i]); err != nil {
			return nil, err
		}
	}
	for _, m := range res[len(acks):] {
		switch {
		case m.Err == nil:
			charged = append(charged, m.Record)
			continue
		case errors.Is(m.Err, ErrNotFound), // purged by a logout meanwhile
			errors.Is(m.Err, errSkipped),           // an ack or charge before it was not made
			errors.Is(m.Err, ErrInvalidTransition), // changed since the claim planned it
			ctx.Err() != nil && errors.Is(m.Err, ctx.Err()):
			return charged, nil
		}
		return charged, m.Err
	}
	return charged, nil
}

// send sends one charged record. An ack is returned, not yet written: the
// lane commits it with the charge of its next record (or with its release).
// Any other outcome is settled here and returns nil; err is fatal for the
// whole flush.
func (f *flushRun) send(ctx context.Context, rec Record) (*settleOp, error) {
	o, l := f.o, f.lease
	now := o.cfg.Clock.Now()
	ev := Event{RecordID: rec.ID, OperationKeyHash: HashKey(rec.OperationKey), Owner: l.Owner, LeaseToken: l.Token, Attempt: rec.Attempts}
	body := rec.Payload
	var err error
	if rec.PayloadRef != "" {
		if body, err = o.cfg.Store.Payload(ctx, rec.PayloadRef); err != nil {
			e := ErrorInfo{Code: "payload_unreadable", Message: short(err.Error())}
			return nil, f.settle(ctx, rec, ev, EventRetry, &e, func(r Record) (Record, error) { return Refund(r, l, now, &e) })
		}
	}
	if o.SchemaGate().Action(&rec) == SchemaMigrate {
		if body, err = migratePayload(o.cfg.Migrations, body, max(rec.PayloadSchemaVersion, 1), o.cfg.SchemaVersion); err != nil {
			// The app's migration failed: the record stays as stored,
			// uncharged, and unsupported here (not a terminal failure:
			// a build with a working migration sends it).
			e := ErrorInfo{Code: CodeSchemaUnsupported, Message: short(err.Error())}
			return nil, f.settle(ctx, rec, ev, EventUnsupported, &e, func(r Record) (Record, error) { return SchemaRefused(r, l, now, e) })
		}
	}
	if !f.sendable(&rec) {
		// The transport attaches the current session's credentials: never
		// send a record under another user's session (session.go).
		_ = f.settle(ctx, rec, ev, EventRetry, nil, func(r Record) (Record, error) { return Refund(r, l, now, nil) })
		return nil, ErrSessionChanged
	}
	resp, serr := o.cfg.Transport.Send(ctx, f.request(&rec, body))
	now = o.cfg.Clock.Now()
	if serr != nil && errors.Is(serr, ErrOffline) && ctx.Err() == nil {
		// No network: not the record's fault, so not charged. The flush
		// stops (every other send would fail the same way) and the queue
		// waits for the network (Reconnected) rather than backing off.
		e := ErrorInfo{Code: CodeOffline, Message: short(serr.Error())}
		if err := f.settle(ctx, rec, ev, EventOffline, &e, func(r Record) (Record, error) { return Refund(r, l, now, &e) }); err != nil {
			return nil, err
		}
		return nil, ErrOffline
	}
	v := Classify(resp, serr, now)
	switch v.Outcome {
	case wire.OutcomeAck:
		sr := StoredResponse{Status: resp.Status, Body: resp.Body, Replayed: resp.Header.Get(wire.HeaderReplayed) == "true"}
		return &settleOp{rec: rec, ev: ev, kind: EventAck, t: func(r Record) (Record, error) { return Ack(r, l, now, sr) }}, nil
	case wire.OutcomeRetry:
		next := now.Add(o.cfg.Backoff.Delay(rec.Attempts, v.RetryAfter, v.HasRetry))
		kind := EventRetry
		if rec.MaxAttempts > 0 && rec.Attempts >= rec.MaxAttempts {
			kind = EventDeadLetter
		}
		return nil, f.settle(ctx, rec, ev, kind, &v.Err, func(r Record) (Record, error) { return Retry(r, l, now, next, v.Err) })
	case wire.OutcomeAuth:
		if err := f.settle(ctx, rec, ev, EventAuth, &v.Err, func(r Record) (Record, error) { return Refund(r, l, now, &v.Err) }); err != nil {
			return nil, err
		}
		user := f.session.UserID
		if _, err := o.cfg.Store.UpdateMeta(ctx, func(m *Meta) error {
			if !contains(m.AuthPaused, user) {
				m.AuthPaused = append(m.AuthPaused, user)
			}
			return nil
		}); err != nil {
			return nil, err
		}
		f.mu.Lock()
		ask := !f.authAsked
		f.authAsked = true
		f.mu.Unlock()
		if ask && o.cfg.OnAuthRequired != nil {
			o.cfg.OnAuthRequired(user)
		}
		return nil, ErrAuthRequired
	case wire.OutcomeSession:
		return nil, f.sessionRefused(ctx, rec, ev, v.Err)
	case wire.OutcomeStale:
		_ = f.settle(ctx, rec, ev, EventStepDown, &v.Err, func(r Record) (Record, error) { return Refund(r, l, now, &v.Err) })
		return nil, &StepDownError{Token: l.FenceToken, Highest: v.Highest}
	case wire.OutcomeConflict:
		return nil, f.settle(ctx, rec, ev, EventConflict, &v.Err, func(r Record) (Record, error) { return MarkConflict(r, l, now, v.Err) })
	default:
		return nil, f.settle(ctx, rec, ev, EventTerminal, &v.Err, func(r Record) (Record, error) { return Terminal(r, l, now, v.Err) })
	}
}

// settle writes a transition under the lease, then counts and emits it. The
// write happens even when ctx is done (the answer arrived; recording it is
// what keeps a retry from being needed). A missing record is not an error.
func (f *flushRun) settle(ctx context.Context, rec Record, ev Event, kind EventKind, e *ErrorInfo, t func(Record) (Record, error)) error {
	op := &settleOp{rec: rec, ev: ev, kind: kind, e: e, t: t}
	res, err := f.commit(context.WithoutCancel(ctx), []RecordUpdate{op.update(nil)})
	if err != nil {
		return err
	}
	return f.settled(op, res[0])
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
	if n.Status == StatusDeadLetter {
		kind = EventDeadLetter
	}
	ev.Kind, ev.At = kind, o.cfg.Clock.Now()
	if e != nil {
		ev.ErrorCode = e.Code
	}
	f.mu.Lock()
	f.health.observe(e, &n)
	f.mu.Unlock()
	f.count(func(r *FlushReport) {
		switch n.Status {
		case StatusAcked:
			r.Acked++
		case StatusFailed:
			r.Retried++
		case StatusDeadLetter:
			r.DeadLettered++
		case StatusTerminalFailed:
			r.Terminal++
		case StatusConflict:
			r.Conflicts++
		}
	}, e)
	o.emit(ev)
	return nil
}
