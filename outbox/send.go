package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// send sends one charged record. An ack is returned, not yet written: the
// lane commits it with the charge of its next record (or with its release).
// Any other outcome is settled here and returns nil; err is fatal for the
// whole flush.
func (f *flushRun) send(ctx context.Context, rec queue.Record) (*settleOp, error) {
	ev := f.recordEvent(rec)
	body, ok, err := f.body(ctx, rec, ev, f.o.cfg.Clock.Now())
	if !ok {
		return nil, err
	}
	return f.sendBody(ctx, rec, ev, body)
}

// sendBody is send once rec's body was made.
func (f *flushRun) sendBody(ctx context.Context, rec queue.Record, ev Event, body []byte) (*settleOp, error) {
	o, l := f.o, f.lease
	now := o.cfg.Clock.Now()
	if !f.sendable(&rec) {
		// The transport attaches the current session's credentials: never
		// send a record under another user's session (session.go).
		_ = f.settle(ctx, rec, ev, EventRetry, nil, func(r queue.Record) (queue.Record, error) { return queue.Refund(r, l, now, nil) })
		return nil, ErrSessionChanged
	}
	resp, serr := o.cfg.Transport.Send(ctx, f.request(&rec, body))
	f.count(func(r *FlushReport) { r.Requests++ }, nil)
	now = o.cfg.Clock.Now()
	if e := offline(ctx, serr); e != nil {
		if err := f.settle(ctx, rec, ev, EventOffline, e, func(r queue.Record) (queue.Record, error) { return queue.Refund(r, l, now, e) }); err != nil {
			return nil, err
		}
		return nil, ErrOffline
	}
	return f.answer(ctx, rec, ev, Classify(resp, serr, now), resp, now)
}

// recordEvent is the event template of a charged record's send.
func (f *flushRun) recordEvent(rec queue.Record) Event {
	return Event{RecordID: rec.ID, OperationKeyHash: HashKey(rec.OperationKey), Owner: f.lease.Owner, LeaseToken: f.lease.Token, Attempt: rec.Attempts}
}

// body is what to send of rec: its payload (from its blob when stored by
// reference), migrated to this build's schema. A record that cannot be
// read or migrated is settled here: ok is false, err fatal for the flush.
func (f *flushRun) body(ctx context.Context, rec queue.Record, ev Event, now time.Time) (body []byte, ok bool, err error) {
	o, l := f.o, f.lease
	body = rec.Payload
	if rec.PayloadRef != "" {
		if body, err = o.cfg.Store.Payload(ctx, rec.PayloadRef); err != nil {
			e := queue.ErrorInfo{Code: "payload_unreadable", Message: queue.Short(err.Error())}
			return nil, false, f.settle(ctx, rec, ev, EventRetry, &e, func(r queue.Record) (queue.Record, error) { return queue.Refund(r, l, now, &e) })
		}
	}
	if o.SchemaGate().Action(&rec) == queue.SchemaMigrate {
		if body, err = queue.MigratePayload(o.cfg.Migrations, body, max(rec.PayloadSchemaVersion, 1), o.cfg.SchemaVersion); err != nil {
			// The app's migration failed: the record stays as stored,
			// uncharged, and unsupported here (not a terminal failure:
			// a build with a working migration sends it).
			e := queue.ErrorInfo{Code: queue.CodeSchemaUnsupported, Message: queue.Short(err.Error())}
			return nil, false, f.settle(ctx, rec, ev, EventUnsupported, &e, func(r queue.Record) (queue.Record, error) { return queue.SchemaRefused(r, l, now, e) })
		}
	}
	return body, true, nil
}

// offline is the error of a send that failed for want of a network
// (ErrOffline while ctx is live), nil for any other result, single or
// batch: not the records' fault, so they go back uncharged, the flush
// stops with ErrOffline (every other send would fail the same way) and the
// queue waits for the network (Reconnected) rather than backing off.
func offline(ctx context.Context, serr error) *queue.ErrorInfo {
	if serr == nil || !errors.Is(serr, ErrOffline) || ctx.Err() != nil {
		return nil
	}
	return &queue.ErrorInfo{Code: queue.CodeOffline, Message: queue.Short(serr.Error())}
}

// answer acts on the receiver's verdict v about rec: an ack is returned
// unwritten (see send); every other outcome is settled here.
func (f *flushRun) answer(ctx context.Context, rec queue.Record, ev Event, v Verdict, resp Response, now time.Time) (*settleOp, error) {
	op := f.verdictOp(rec, ev, v, resp, now)
	if v.Outcome == wire.OutcomeAck {
		return op, nil
	}
	return nil, f.endAfter(ctx, v, f.settleOps(ctx, []*settleOp{op}))
}

// endAfter is the error a verdict ends the flush with once the write of
// its records returned werr, single or batch: a stale token's step-down
// wins over the write's failure (the owner must step down either way; the
// records left in flight are recovered after their lease), any other
// verdict's write failure comes first.
func (f *flushRun) endAfter(ctx context.Context, v Verdict, werr error) error {
	if werr != nil && v.Outcome != wire.OutcomeStale {
		return werr
	}
	return f.verdictEnd(ctx, v)
}

// verdictOp is the transition of rec for the receiver's verdict v, with
// what to count and emit: the one table of what each answer does to a
// record, for single sends and for each mutation of a batch.
func (f *flushRun) verdictOp(rec queue.Record, ev Event, v Verdict, resp Response, now time.Time) *settleOp {
	o, l := f.o, f.lease
	op := &settleOp{rec: rec, ev: ev, e: &v.Err}
	switch v.Outcome {
	case wire.OutcomeAck:
		sr := queue.StoredResponse{Status: resp.Status, Body: resp.Body, Replayed: resp.Header.Get(wire.HeaderReplayed) == "true"}
		op.kind, op.e = EventAck, nil
		op.t = func(r queue.Record) (queue.Record, error) { return queue.Ack(r, l, now, sr) }
	case wire.OutcomeRetry:
		next := now.Add(o.cfg.Backoff.Delay(rec.Attempts, v.RetryAfter, v.HasRetry))
		op.kind = EventRetry
		if rec.MaxAttempts > 0 && rec.Attempts >= rec.MaxAttempts {
			op.kind = EventDeadLetter
		}
		op.t = func(r queue.Record) (queue.Record, error) { return queue.Retry(r, l, now, next, v.Err) }
	case wire.OutcomeAuth:
		// Not the record's fault: back uncharged (verdictEnd pauses the user).
		op.kind = EventAuth
		op.t = func(r queue.Record) (queue.Record, error) { return queue.Refund(r, l, now, op.e) }
	case wire.OutcomeSession:
		e := v.Err
		e.Code = CodeSessionMismatch
		op.kind, op.e = EventSessionMismatch, &e
		op.t = func(r queue.Record) (queue.Record, error) { return queue.Refund(r, l, now, &e) }
	case wire.OutcomeStale:
		op.kind = EventStepDown
		op.t = func(r queue.Record) (queue.Record, error) { return queue.Refund(r, l, now, op.e) }
	case wire.OutcomeConflict:
		op.kind = EventConflict
		op.t = func(r queue.Record) (queue.Record, error) { return queue.MarkConflict(r, l, now, v.Err) }
	default:
		op.kind = EventTerminal
		op.t = func(r queue.Record) (queue.Record, error) { return queue.Terminal(r, l, now, v.Err) }
	}
	return op
}

// verdictEnd is what a verdict does beyond its records, once they are
// written: a 401 pauses the user's queue and tells the app once per flush,
// a session mismatch holds the user's records (holdUser), a stale token
// steps down. Each ends the flush with its error; other verdicts return nil.
func (f *flushRun) verdictEnd(ctx context.Context, v Verdict) error {
	switch v.Outcome {
	case wire.OutcomeAuth:
		return f.pauseAuth(ctx)
	case wire.OutcomeSession:
		if err := f.holdUser(context.WithoutCancel(ctx), f.session.UserID); err != nil {
			return err
		}
		return ErrSessionMismatch
	case wire.OutcomeStale:
		return &StepDownError{Token: f.lease.FenceToken, Highest: v.Highest}
	}
	return nil
}

// pauseAuth handles a 401 once its records are back uncharged: the user's
// queue is paused (Meta.AuthPaused) and the app told once per flush.
func (f *flushRun) pauseAuth(ctx context.Context) error {
	o := f.o
	user := f.session.UserID
	if _, err := o.cfg.Store.UpdateMeta(ctx, func(m *Meta) error {
		if !contains(m.AuthPaused, user) {
			m.AuthPaused = append(m.AuthPaused, user)
		}
		return nil
	}); err != nil {
		return err
	}
	f.mu.Lock()
	ask := !f.authAsked
	f.authAsked = true
	f.mu.Unlock()
	if ask && o.cfg.OnAuthRequired != nil {
		o.cfg.OnAuthRequired(user)
	}
	return ErrAuthRequired
}

// request builds the wire request for rec.
func (f *flushRun) request(rec *queue.Record, body []byte) Request {
	h := f.header(rec.UserID)
	h[wire.HeaderIdempotencyKey] = wire.FormatIdempotencyKey(rec.IdempotencyKey)
	h[wire.HeaderOperationID] = rec.ID
	return Request{Method: "POST", Endpoint: f.endpoint(rec), Header: h, Body: body, RecordID: rec.ID, UserID: rec.UserID}
}

// header is what every request of this flush carries, single or batch: the
// user it is sent for and the lease's fencing resource and token.
func (f *flushRun) header(user string) Header {
	h := Header{wire.HeaderClientUser: wire.FormatClientUser(user)}
	if f.lease.Resource != "" {
		h[wire.HeaderResource] = f.lease.Resource
	}
	if f.lease.FenceToken != 0 {
		h[wire.HeaderFencingToken] = wire.FormatToken(f.lease.FenceToken)
	}
	return h
}

// endpoint is where rec is POSTed alone: its policy's endpoint, else the
// Outbox's.
func (f *flushRun) endpoint(rec *queue.Record) string {
	if p, ok := f.o.cfg.Policies[rec.OperationType]; ok && p.Endpoint != "" {
		return p.Endpoint
	}
	return f.o.cfg.Endpoint
}
