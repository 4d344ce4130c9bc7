package outbox

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// FailureKind says why sending fails (SendFailure.Kind).
type FailureKind string

const (
	FailureOffline     FailureKind = "offline"      // the browser reports no network
	FailureUnreachable FailureKind = "unreachable"  // no answer: the server is down, a network error or timeout
	FailureServerError FailureKind = "server-error" // 5xx, 408 or 425
	FailureRateLimited FailureKind = "rate-limited" // 429
	FailurePausedAuth  FailureKind = "paused-auth"  // a record's 401: the user's queue waits for Resume
	// FailureUnauthorized and FailureRefused are answers to the fencing
	// token request (401, other 4xx): nothing can be sent until it gets one;
	// it is retried with backoff.
	FailureUnauthorized FailureKind = "unauthorized"
	FailureRefused      FailureKind = "refused"
)

// SendFailure is the flush owner's last failure to send, kept in the
// queue's metadata (Meta.Failure) so that the status of every tab says that
// sending fails, why and when it is tried next, not only the owner's event
// stream. The owner clears it once a flush reaches the server again.
type SendFailure struct {
	Kind  FailureKind     // "": sending works (or was never tried)
	Error queue.ErrorInfo // a stable code and a short message; never a payload or credential
	Since time.Time       // the first failure of this spell
	// NextAttemptAt is when the owner tries again; zero when an event
	// does it (the online event, Resume).
	NextAttemptAt time.Time
}

// Failing reports whether sending is failing.
func (f SendFailure) Failing() bool { return f.Kind != "" }

// failureOf is the kind of failure a send's error is, false for one that
// concerns its record only (a terminal 4xx, a conflict, a stale owner). The
// policy is wire.Classify's (the single table): its auth outcome pauses,
// its retried answers are server errors, 429 being told apart as a rate
// limit for the status only.
func failureOf(e queue.ErrorInfo) (FailureKind, bool) {
	switch {
	case e.Code == queue.CodeOffline:
		return FailureOffline, true
	case e.Code == queue.CodeNetwork:
		return FailureUnreachable, true
	case e.Status == 0: // no answer's status: a local error about the record
		return "", false
	}
	switch wire.Classify(e.Status, false) {
	case wire.OutcomeAuth:
		return FailurePausedAuth, true
	case wire.OutcomeRetry:
		if e.Status == 429 {
			return FailureRateLimited, true
		}
		return FailureServerError, true
	}
	return "", false
}

// fenceFailureOf is the kind of failure a failed fencing token request is:
// failureOf's, except that a 401 pauses nothing (the request is retried) and
// any other answer is a refusal.
func fenceFailureOf(e queue.ErrorInfo) FailureKind {
	k, ok := failureOf(e)
	switch {
	case k == FailurePausedAuth:
		return FailureUnauthorized
	case !ok:
		return FailureRefused
	}
	return k
}

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

// flushHealth is what one Flush learned about sending, in the order its
// sends settled: the last failure (nil once a later send got an answer
// that is not one), whether the server answered, and the earliest retry
// time of its failed records.
type flushHealth struct {
	failure *SendFailure
	reached bool
	next    time.Time
}

// observe feeds one settled send: e its error (nil for an ack), n the
// record as written.
func (h *flushHealth) observe(e *queue.ErrorInfo, n *queue.Record) {
	if e == nil {
		if n.Status == queue.StatusAcked {
			h.failure, h.reached, h.next = nil, true, time.Time{}
		}
		return
	}
	k, ok := failureOf(*e)
	if !ok {
		if e.Status != 0 { // an answer about the record: the server works
			h.failure, h.reached, h.next = nil, true, time.Time{}
		}
		return
	}
	if n.Status.Settled() {
		// Dead-lettered: nothing retries it, so it says nothing about
		// sending from now on.
		return
	}
	f := SendFailure{Kind: k, Error: *e}
	if n.Status == queue.StatusFailed && k != FailureOffline && k != FailurePausedAuth {
		if h.next.IsZero() || n.NextAttemptAt.Before(h.next) {
			h.next = n.NextAttemptAt
		}
		f.NextAttemptAt = h.next
	}
	h.failure = &f
}

// apply writes the flush's outcome into m at now; a flush that sent
// nothing changes nothing.
func (h *flushHealth) apply(m *Meta, now time.Time) {
	switch {
	case h.failure != nil:
		m.noteFailure(h.failure.Kind, h.failure.Error, now, h.failure.NextAttemptAt)
	case h.reached:
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
		m.noteFailure(fenceFailureOf(e), e, now, next)
		return nil
	})
	return err
}

// FenceError is the ErrorInfo of a failed fencing token request: its
// answer's status, or the transport's error (offline, network).
func FenceError(status int, err error, offline bool) queue.ErrorInfo {
	switch {
	case err != nil && offline:
		return queue.ErrorInfo{Code: queue.CodeOffline, Message: queue.Short("fence: " + err.Error())}
	case err != nil:
		return queue.ErrorInfo{Code: queue.CodeNetwork, Message: queue.Short("fence: " + err.Error())}
	case status == 200:
		return queue.ErrorInfo{Code: "fence_malformed", Message: "fence: answer without a token", Status: status}
	}
	n := strconv.Itoa(status)
	return queue.ErrorInfo{Code: "http_" + n, Message: "fence: answered " + n, Status: status}
}
