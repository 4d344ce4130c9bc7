package receiver

import (
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/tabfence/tabfence/wire"
)

// verdict is how one mutation is answered: decided once, then rendered as
// a Response when it came alone or as a wire.BatchResult in a batch, so a
// replay, a refusal or a failure is answered by the same rule on both paths.
type verdict struct {
	outcome    wire.BatchOutcome
	resp       Response      // status and body (alone, headers too)
	problem    string        // the receiver's own problem type, else ""
	retryAfter time.Duration // 0 for none
}

// problemVerdict answers with the receiver's own problem p.
func problemVerdict(o wire.BatchOutcome, p Problem, retryAfter time.Duration) verdict {
	return verdict{outcome: o, resp: ProblemResponse(p), problem: p.Type, retryAfter: retryAfter}
}

// response renders v for a request that came alone: a replay says so, a
// wait is a Retry-After header.
func (v verdict) response() Response {
	resp := v.resp
	if v.outcome == wire.BatchReplayed || v.retryAfter > 0 {
		if resp.Header == nil {
			resp.Header = make(map[string][]string, 1)
		}
	}
	if v.outcome == wire.BatchReplayed {
		resp.Header.Set(wire.HeaderReplayed, "true")
	}
	if v.retryAfter > 0 {
		resp.Header.Set(wire.HeaderRetryAfter, strconv.FormatInt(int64((v.retryAfter+time.Second-1)/time.Second), 10))
	}
	return resp
}

// result renders v as the batch result of key.
func (v verdict) result(key string) wire.BatchResult {
	return wire.BatchResult{Key: key, Outcome: v.outcome, Status: v.resp.Status, Body: v.resp.Body,
		Problem: v.problem, RetryAfter: v.retryAfter}
}

// unrun answers a claim that does not run the handler: a replay of the
// stored answer, a key reused for another mutation, a key whose attempt
// is running elsewhere. It reports whether it answered.
func (rc *Receiver) unrun(outcome claimOutcome, rec record) (verdict, bool) {
	switch outcome {
	case claimReplay:
		return verdict{outcome: wire.BatchReplayed, resp: rec.response()}, true
	case claimReuse:
		return problemVerdict(wire.BatchRejected, probKeyReuse, 0), true
	case claimInFlight:
		return problemVerdict(wire.BatchRetry, probInFlight, time.Duration(rc.inFlightWait(rec))*time.Second), true
	}
	return verdict{}, false
}

// errorVerdict answers an attempt that failed with err, alone or in a
// batch (where it is a retry). Only a fence rejection's problem goes to
// the client as is; errors are logged, never sent. A lost claim means
// another attempt took the key over: in flight.
func errorVerdict(log *slog.Logger, err error) verdict {
	var p *Problem
	switch {
	case errors.As(err, &p):
		return problemVerdict(wire.BatchRetry, *p, 0)
	case errors.Is(err, errClaimLost):
		return problemVerdict(wire.BatchRetry, probInFlight, time.Second)
	case errors.Is(err, errCommitUnknown):
		log.Error("commit", "err", err)
		return problemVerdict(wire.BatchRetry, probCommitUnknown, 0)
	default:
		log.Error("handler", "err", err)
		return problemVerdict(wire.BatchRetry, probInternal, 0)
	}
}
