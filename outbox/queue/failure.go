package queue

import (
	"strconv"
	"time"

	"github.com/tabfence/tabfence/wire"
)

// The failures of sending, as the status shows them: what kind of failure
// an error is (the outbox's flush health and fencing token requests).

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
// queue's metadata (the outbox's Meta.Failure) so that the status of every
// tab says that sending fails, why and when it is tried next, not only the
// owner's event stream. The owner clears it once a flush reaches the
// server again.
type SendFailure struct {
	Kind  FailureKind // "": sending works (or was never tried)
	Error ErrorInfo   // a stable code and a short message; never a payload or credential
	Since time.Time   // the first failure of this spell
	// NextAttemptAt is when the owner tries again; zero when an event
	// does it (the online event, Resume).
	NextAttemptAt time.Time
}

// Failing reports whether sending is failing.
func (f SendFailure) Failing() bool { return f.Kind != "" }

// FailureOf is the kind of failure a send's error is, false for one that
// concerns its record only (a terminal 4xx, a conflict, a stale owner). The
// policy is wire.Classify's (the single table): its auth outcome pauses,
// its retried answers are server errors, 429 being told apart as a rate
// limit for the status only.
func FailureOf(e ErrorInfo) (FailureKind, bool) {
	switch {
	case e.Code == CodeOffline:
		return FailureOffline, true
	case e.Code == CodeNetwork:
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

// FenceFailureOf is the kind of failure a failed fencing token request is:
// FailureOf's, except that a 401 pauses nothing (the request is retried) and
// any other answer is a refusal.
func FenceFailureOf(e ErrorInfo) FailureKind {
	k, ok := FailureOf(e)
	switch {
	case k == FailurePausedAuth:
		return FailureUnauthorized
	case !ok:
		return FailureRefused
	}
	return k
}

// FenceError is the ErrorInfo of a failed fencing token request: its
// answer's status, or the transport's error (offline, network).
func FenceError(status int, err error, offline bool) ErrorInfo {
	switch {
	case err != nil && offline:
		return ErrorInfo{Code: CodeOffline, Message: Short("fence: " + err.Error())}
	case err != nil:
		return ErrorInfo{Code: CodeNetwork, Message: Short("fence: " + err.Error())}
	case status == 200:
		return ErrorInfo{Code: "fence_malformed", Message: "fence: answer without a token", Status: status}
	}
	n := strconv.Itoa(status)
	return ErrorInfo{Code: "http_" + n, Message: "fence: answered " + n, Status: status}
}
