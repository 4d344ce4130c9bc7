package queue

import (
	"strconv"
	"time"

	"github.com/tabfence/tabfence/wire"
)

// Verdict is what the flusher does with one send's result.
type Verdict struct {
	Outcome    wire.Outcome
	RetryAfter time.Duration // when HasRetryAfter
	HasRetry   bool
	Highest    uint64 // X-Fencing-Highest on OutcomeStale
	Err        ErrorInfo
}

// Classify turns a send's result (an answer of status, header and body,
// or err when none arrived) into a Verdict with wire.Classify, the
// single client-side policy table: 2xx ack; 408/425/429/5xx/network retry;
// 401 auth; 409 with X-Fencing-Highest stale; other 409 conflict; other 4xx
// terminal. One refinement: a 409 whose problem type is request-in-flight
// (the same key is still running at the server, e.g. a dead owner's request)
// is retried, not a conflict — it is the same command, not a disagreement.
// And a 403 whose problem type is session-mismatch (the request carried
// another user's credentials than its record's, see session.go) is
// OutcomeSession: neither terminal nor retried, the record waits for its
// user's next login.
func Classify(status int, header wire.Header, body []byte, err error, now time.Time) Verdict {
	if err != nil {
		return Verdict{Outcome: wire.OutcomeRetry, Err: ErrorInfo{Code: CodeNetwork, Message: Short(err.Error())}}
	}
	highest := header.Get(wire.HeaderFencingHighest)
	v := Verdict{Outcome: wire.Classify(status, highest != "")}
	if v.Outcome == wire.OutcomeConflict && bodyContains(body, wire.ProblemInFlight) {
		v.Outcome = wire.OutcomeRetry
	}
	if status == 403 && bodyContains(body, wire.ProblemSessionMismatch) {
		v.Outcome = wire.OutcomeSession
	}
	if v.Outcome == wire.OutcomeStale {
		v.Highest, _ = wire.ParseToken(highest)
	}
	if ra := header.Get(wire.HeaderRetryAfter); ra != "" {
		v.RetryAfter, v.HasRetry = wire.ParseRetryAfter(ra, now)
	}
	if v.Outcome != wire.OutcomeAck {
		v.Err = HTTPError(v.Outcome, status)
	}
	return v
}

// HTTPError is the error of an answer of status that is not an ack.
func HTTPError(o wire.Outcome, status int) ErrorInfo {
	return ErrorInfo{Code: "http_" + strconv.Itoa(status), Message: o.String(), Status: status}
}

// bodyContains reports whether sub is within b. It is bytes.Contains without
// importing package bytes, whose dependency on unicode links unicode's
// case-folding tables into the download for this one call.
func bodyContains(b []byte, sub string) bool {
	for i := 0; i+len(sub) <= len(b); i++ {
		if string(b[i:i+len(sub)]) == sub {
			return true
		}
	}
	return false
}

// ResultVerdict is the verdict on one mutation's result, as Classify gives
// it for the same answer to the record sent alone: the result's status and
// body, replayed marked as the Idempotent-Replayed header marks it, its
// retryAfter as a Retry-After header, its problem type where Classify looks
// for one; the header is the answer's as the record's StoredResponse
// keeps it. ok is false for a result the format does not allow (applied
// without a 2xx, rejected without a 4xx, a status below 200).
func ResultVerdict(r wire.BatchResult, now time.Time) (Verdict, wire.Header, bool) {
	h := wire.Header{}
	if r.Outcome == wire.BatchReplayed {
		h[wire.HeaderReplayed] = "true"
	}
	if r.RetryAfter > 0 {
		h[wire.HeaderRetryAfter] = strconv.FormatInt(int64(r.RetryAfter/time.Second), 10)
	}
	body := r.Body
	if r.Problem != "" {
		body = append(append(append([]byte(nil), r.Body...), ' '), r.Problem...)
	}
	v := Classify(r.Status, h, body, nil, now)
	switch {
	case r.Status < 200,
		r.Outcome == wire.BatchApplied && v.Outcome != wire.OutcomeAck,
		r.Outcome == wire.BatchRejected && (r.Status < 400 || r.Status > 499):
		return v, h, false
	case r.Outcome == wire.BatchRetry && v.Outcome != wire.OutcomeRetry:
		v.Outcome = wire.OutcomeRetry
		v.Err = HTTPError(v.Outcome, r.Status)
	}
	return v, h, true
}
