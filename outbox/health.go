package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/tabfence/tabfence/outbox/queue"
)

// Why sending fails, kept in the queue's metadata (queue.SendFailure).
type (
	FailureKind = queue.FailureKind
	SendFailure = queue.SendFailure
)

// The kinds of failure (queue.FailureKind).
const (
	FailureOffline      = queue.FailureOffline
	FailureUnreachable  = queue.FailureUnreachable
	FailureServerError  = queue.FailureServerError
	FailureRateLimited  = queue.FailureRateLimited
	FailurePausedAuth   = queue.FailurePausedAuth
	FailureUnauthorized = queue.FailureUnauthorized
	FailureRefused      = queue.FailureRefused
)

// noteFailure records a failure of kind k at now, tried again at next: the
// status shows it, and LastError is its error.
func (m *Meta) noteFailure(k FailureKind, e queue.ErrorInfo, now, next time.Time) {
	since := now
	if m.Failure.Failing() {
		since = m.Failure.Since
	}
	m.Failure = SendFailure{Kind: k, Error: e, Since: since, NextAttemptAt: next}
	m.LastError = &e
}

// noteReached records that a flush reached the server without a failure:
// the failure spell, and its LastError, end.
func (m *Meta) noteReached() {
	if m.Failure.Failing() {
		m.Failure, m.LastError = SendFailure{}, nil
	}
}

// flushHealth is what one Flush learned about sending (queue.FlushHealth).
type flushHealth struct{ queue.FlushHealth }

// apply writes the flush's outcome into m at now; a flush that sent
// nothing changes nothing.
func (h *flushHealth) apply(m *Meta, now time.Time) {
	switch {
	case h.Failure != nil:
		m.noteFailure(h.Failure.Kind, h.Failure.Error, now, h.Failure.NextAttemptAt)
	case h.Reached:
		m.noteReached()
	}
}

// hideIdleFailure is the one rule of when the status shows the stored
// failure: only while something is left to send (pending, in flight or
// waiting to be retried, and not left alone for its schema). With nothing
// to send no flush runs to clear it, and nothing fails: the server's
// recovery, a dead letter or a discard would otherwise leave it showing.
func (p *Projection) hideIdleFailure() {
	if p.Pending+p.Sending+p.Failed-p.Unsupported <= 0 {
		p.Failure = SendFailure{}
	}
}

// NoteReached records that the server answered (the Runtime: a fencing
// token was issued), ending a failure spell even when there is nothing to
// send. Call it only when the status shows a failure: it is a write.
func (o *Outbox) NoteReached(ctx context.Context) error {
	_, err := o.cfg.Store.UpdateMeta(ctx, func(m *Meta) error {
		if !m.Failure.Failing() {
			return errUnchanged
		}
		m.noteReached()
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

var errUnchanged = errors.New("outbox: unchanged")

// NoteFenceFailure records in the queue's metadata that the fencing token
// request failed (e: FenceError's) and is retried at next: nothing can be
// sent meanwhile, and every tab's status says so.
// FenceFailed emits the end of a flush that never started because owner
// got no fencing token (err) under its lease token.
func (o *Outbox) FenceFailed(owner string, token uint64, err error) {
	o.emit(Event{Kind: EventFlushEnd, At: o.cfg.Clock.Now(), Owner: owner, LeaseToken: token, Reason: queue.Short("fence: " + err.Error())})
}

func (o *Outbox) NoteFenceFailure(ctx context.Context, e queue.ErrorInfo, next time.Time) error {
	now := o.cfg.Clock.Now()
	e.At = now
	_, err := o.cfg.Store.UpdateMeta(ctx, func(m *Meta) error {
		m.noteFailure(queue.FenceFailureOf(e), e, now, next)
		return nil
	})
	return err
}

// FenceError is the ErrorInfo of a failed fencing token request
// (queue.FenceError).
func FenceError(status int, err error, offline bool) queue.ErrorInfo {
	return queue.FenceError(status, err, offline)
}
