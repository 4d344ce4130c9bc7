package outbox

import (
	"strconv"
	"time"

	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// Verdict is what the flusher does with one send's result.
type Verdict struct {
	Outcome    wire.Outcome
	RetryAfter time.Duration // when HasRetryAfter
	HasRetry   bool
	Highest    uint64 // X-Fencing-Highest on OutcomeStale
	Err        queue.ErrorInfo
}

// Classify turns a transport result into a Verdict with wire.Classify, the
// single client-side policy table: 2xx ack; 408/425/429/5xx/network retry;
// 401 auth; 409 with X-Fencing-Highest stale; other 409 conflict; other 4xx
// terminal. One refinement: a 409 whose problem type is request-in-flight
// (the same key is still running at the server, e.g. a dead owner's request)
// is retried, not a conflict — it is the same command, not a disagreement.
// And a 403 whose problem type is session-mismatch (the request carried
// another user's credentials than its record's, see session.go) is
// OutcomeSession: neither terminal nor retried, the record waits for its
// user's next login.
func Classify(resp Response, err error, now time.Time) Verdict {
	if err != nil {
		return Verdict{Outcome: wire.OutcomeRetry, Err: queue.ErrorInfo{Code: queue.CodeNetwork, Message: queue.Short(err.Error())}}
	}
	highest := resp.Header.Get(wire.HeaderFencingHighest)
	v := Verdict{Outcome: wire.Classify(resp.Status, highest != "")}
	if v.Outcome == wire.OutcomeConflict && bodyContains(resp.Body, wire.ProblemInFlight) {
		v.Outcome = wire.OutcomeRetry
	}
	if resp.Status == 403 && bodyContains(resp.Body, wire.ProblemSessionMismatch) {
		v.Outcome = wire.OutcomeSession
	}
	if v.Outcome == wire.OutcomeStale {
		v.Highest, _ = wire.ParseToken(highest)
	}
	if ra := resp.Header.Get(wire.HeaderRetryAfter); ra != "" {
		v.RetryAfter, v.HasRetry = wire.ParseRetryAfter(ra, now)
	}
	if v.Outcome != wire.OutcomeAck {
		v.Err = httpError(v.Outcome, resp.Status)
	}
	return v
}

// httpError is the error of an answer of status that is not an ack.
func httpError(o wire.Outcome, status int) queue.ErrorInfo {
	return queue.ErrorInfo{Code: "http_" + strconv.Itoa(status), Message: o.String(), Status: status}
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

// Backoff is the retry timing of records (queue.Backoff): exponential
// backoff with full jitter, Retry-After a floor.
type Backoff = queue.Backoff
