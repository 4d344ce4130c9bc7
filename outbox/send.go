package outbox

import (
	"context"
	"errors"

	"github.com/tabfence/tabfence/internal/wire"
)

// sendOne sends one claimed record and records the outcome. acked tells the
// lane whether it may continue; err is fatal for the whole flush.
func (f *flushRun) sendOne(ctx context.Context, claimed Record) (acked bool, err error) {
	o, l := f.o, f.lease
	now := o.cfg.Clock.Now()
	rec, err := o.cfg.Store.Update(ctx, l, claimed.ID, apply(func(r Record) (Record, error) {
		return MarkSending(r, l, now)
	}))
	if err != nil {
		if errors.Is(err, ErrNotFound) { // purged by a logout meanwhile
			return false, nil
		}
		return false, err
	}
	ev := Event{RecordID: rec.ID, OperationKeyHash: hashKey(rec.OperationKey), Owner: l.Owner, LeaseToken: l.Token, Attempt: rec.Attempts}
	body := rec.Payload
	if rec.PayloadRef != "" {
		if body, err = o.cfg.Store.Payload(ctx, rec.PayloadRef); err != nil {
			e := ErrorInfo{Code: "payload_unreadable", Message: short(err.Error())}
			return false, f.settle(ctx, rec, ev, EventRetry, &e, func(r Record) (Record, error) { return Refund(r, l, now, &e) })
		}
	}
	if rec.PayloadSchemaVersion < o.cfg.SchemaVersion {
		if body, err = migratePayload(o.cfg.Migrations, body, rec.PayloadSchemaVersion, o.cfg.SchemaVersion); err != nil {
			e := ErrorInfo{Code: "schema_unsupported", Message: short(err.Error())}
			return false, f.settle(ctx, rec, ev, EventTerminal, &e, func(r Record) (Record, error) { return Terminal(r, l, now, e) })
		}
	}
	if cur := o.Session(); cur.UserID != rec.UserID || cur.TenantID != rec.TenantID {
		// The transport attaches the current session's credentials: never
		// send a record under another user's session.
		_ = f.settle(ctx, rec, ev, EventRetry, nil, func(r Record) (Record, error) { return Refund(r, l, now, nil) })
		return false, ErrSessionChanged
	}
	resp, serr := o.cfg.Transport.Send(ctx, f.request(&rec, body))
	now = o.cfg.Clock.Now()
	v := Classify(resp, serr, now)
	switch v.Outcome {
	case wire.OutcomeAck:
		sr := StoredResponse{Status: resp.Status, Body: resp.Body, Replayed: resp.Header.Get(wire.HeaderReplayed) == "true"}
		err := f.settle(ctx, rec, ev, EventAck, nil, func(r Record) (Record, error) { return Ack(r, l, now, sr) })
		return err == nil, err
	case wire.OutcomeRetry:
		next := now.Add(o.cfg.Backoff.Delay(rec.Attempts, v.RetryAfter, v.HasRetry))
		kind := EventRetry
		if rec.MaxAttempts > 0 && rec.Attempts >= rec.MaxAttempts {
			kind = EventDeadLetter
		}
		return false, f.settle(ctx, rec, ev, kind, &v.Err, func(r Record) (Record, error) { return Retry(r, l, now, next, v.Err) })
	case wire.OutcomeAuth:
		if err := f.settle(ctx, rec, ev, EventAuth, &v.Err, func(r Record) (Record, error) { return Refund(r, l, now, &v.Err) }); err != nil {
			return false, err
		}
		user := f.session.UserID
		if _, err := o.cfg.Store.UpdateMeta(ctx, func(m *Meta) error {
			if !contains(m.AuthPaused, user) {
				m.AuthPaused = append(m.AuthPaused, user)
			}
			return nil
		}); err != nil {
			return false, err
		}
		f.mu.Lock()
		ask := !f.authAsked
		f.authAsked = true
		f.mu.Unlock()
		if ask && o.cfg.OnAuthRequired != nil {
			o.cfg.OnAuthRequired(user)
		}
		return false, ErrAuthRequired
	case wire.OutcomeStale:
		_ = f.settle(ctx, rec, ev, EventStepDown, &v.Err, func(r Record) (Record, error) { return Refund(r, l, now, &v.Err) })
		return false, &StepDownError{Token: l.FenceToken, Highest: v.Highest}
	case wire.OutcomeConflict:
		return false, f.settle(ctx, rec, ev, EventConflict, &v.Err, func(r Record) (Record, error) { return MarkConflict(r, l, now, v.Err) })
	default:
		return false, f.settle(ctx, rec, ev, EventTerminal, &v.Err, func(r Record) (Record, error) { return Terminal(r, l, now, v.Err) })
	}
}

// settle writes a transition under the lease, then counts and emits it. The
// write happens even when ctx is done (the answer arrived; recording it is
// what keeps a retry from being needed). A missing record is not an error.
func (f *flushRun) settle(ctx context.Context, rec Record, ev Event, kind EventKind, e *ErrorInfo, t func(Record) (Record, error)) error {
	o := f.o
	n, err := o.cfg.Store.Update(context.WithoutCancel(ctx), f.lease, rec.ID, apply(t))
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if n.Status == StatusDeadLetter {
		kind = EventDeadLetter
	}
	ev.Kind, ev.At = kind, o.cfg.Clock.Now()
	if e != nil {
		ev.ErrorCode = e.Code
	}
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
