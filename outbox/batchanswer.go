package outbox

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// The answer to a batch request: a results document, one result per
// mutation, each applied to its record as the record's own answer would
// be; or an answer about the whole request.

// pageAnswer is the transition of every record of s for the answer to its
// request, and what the page does beyond its records once they are written
// (nil: nothing). A results document is answered mutation by mutation; any
// other answer is the whole page's (batchVerdict).
func (f *flushRun) pageAnswer(ctx context.Context, s *pageSend, resp Response, serr error, now time.Time) ([]*settleOp, func() error) {
	l := f.lease
	if serr != nil && errors.Is(serr, ErrOffline) && ctx.Err() == nil {
		// No network: not the records' fault (send.go's rule).
		e := queue.ErrorInfo{Code: queue.CodeOffline, Message: queue.Short(serr.Error())}
		return f.eachOp(s, EventOffline, &e, func(r queue.Record) (queue.Record, error) { return queue.Refund(r, l, now, &e) }),
			func() error { return ErrOffline }
	}
	v := Classify(resp, serr, now)
	if serr == nil && v.Outcome == wire.OutcomeAck {
		if ops, vs, ok := f.resultOps(s, resp, now); ok {
			return ops, f.resultsEnd(ctx, vs)
		}
	}
	return f.batchVerdict(ctx, s, v, resp, serr, now)
}

// eachOp is the same transition for every record of s.
func (f *flushRun) eachOp(s *pageSend, kind EventKind, e *queue.ErrorInfo, t func(queue.Record) (queue.Record, error)) []*settleOp {
	ops := make([]*settleOp, len(s.recs))
	for i, rec := range s.recs {
		ops[i] = &settleOp{rec: rec, ev: s.evs[i], kind: kind, e: e, t: t}
	}
	return ops
}

// resultOps is every record's transition for the results document of
// resp, each result read as the record's own answer (resultVerdict). ok is
// false when resp is not a results document for the keys sent, or one of
// its results contradicts the format: then none of it is believed.
func (f *flushRun) resultOps(s *pageSend, resp Response, now time.Time) ([]*settleOp, []Verdict, bool) {
	rs, err := wire.ParseBatchResponse(resp.Body, s.keys)
	if err != nil {
		return nil, nil, false
	}
	l := f.lease
	ops := make([]*settleOp, len(rs))
	vs := make([]Verdict, 0, len(rs))
	for i, r := range rs {
		if r.Outcome == wire.BatchNotAttempted {
			// An earlier mutation of its entity did not succeed: the
			// record was not tried, so its attempt is not spent.
			ev := s.evs[i]
			ev.Reason = string(r.Outcome)
			ops[i] = &settleOp{rec: s.recs[i], ev: ev, kind: EventRetry, t: func(r queue.Record) (queue.Record, error) { return queue.Refund(r, l, now, nil) }}
			continue
		}
		v, rresp, ok := resultVerdict(r, now)
		if !ok {
			return nil, nil, false
		}
		ops[i] = f.verdictOp(s.recs[i], s.evs[i], v, rresp, now)
		vs = append(vs, v)
	}
	return ops, vs, true
}

// resultVerdict is the verdict on one mutation's result, as Classify gives
// it for the same answer to the record sent alone: the result's status and
// body, replayed marked as the Idempotent-Replayed header marks it, its
// retryAfter as a Retry-After header, its problem type where Classify looks
// for one. ok is false for a result the format does not allow (applied
// without a 2xx, rejected without a 4xx, a status below 200).
func resultVerdict(r wire.BatchResult, now time.Time) (Verdict, Response, bool) {
	resp := Response{Status: r.Status, Body: r.Body, Header: Header{}}
	if r.Outcome == wire.BatchReplayed {
		resp.Header[wire.HeaderReplayed] = "true"
	}
	if r.RetryAfter > 0 {
		resp.Header[wire.HeaderRetryAfter] = strconv.FormatInt(int64(r.RetryAfter/time.Second), 10)
	}
	c := resp
	if r.Problem != "" {
		c.Body = append(append(append([]byte(nil), r.Body...), ' '), r.Problem...)
	}
	v := Classify(c, nil, now)
	switch {
	case r.Status < 200:
		return v, resp, false
	case r.Outcome == wire.BatchApplied && v.Outcome != wire.OutcomeAck,
		r.Outcome == wire.BatchRejected && (r.Status < 400 || r.Status > 499):
		return v, resp, false
	case r.Outcome == wire.BatchRetry && v.Outcome != wire.OutcomeRetry:
		v.Outcome = wire.OutcomeRetry
		v.Err = queue.ErrorInfo{Code: "http_" + strconv.Itoa(r.Status), Message: v.Outcome.String(), Status: r.Status}
	}
	return v, resp, true
}

// resultsEnd is what the results of a page do beyond its records: the end
// of each kind of verdict that has one (verdictEnd: a mutation's 401 or
// session mismatch), once. nil: none.
func (f *flushRun) resultsEnd(ctx context.Context, vs []Verdict) func() error {
	var ends []Verdict
	for _, v := range vs {
		switch v.Outcome {
		case wire.OutcomeAuth, wire.OutcomeSession, wire.OutcomeStale:
			if !hasOutcome(ends, v.Outcome) {
				ends = append(ends, v)
			}
		}
	}
	if len(ends) == 0 {
		return nil
	}
	return func() error {
		var first error
		for _, v := range ends {
			if err := f.verdictEnd(ctx, v); first == nil {
				first = err
			}
		}
		return first
	}
}

func hasOutcome(vs []Verdict, o wire.Outcome) bool {
	for _, v := range vs {
		if v.Outcome == o {
			return true
		}
	}
	return false
}

// batchVerdict is the page's transitions and end for an answer that is not
// a results document: the whole request's verdict v. A network error, a
// 5xx or 429 (Retry-After honoured), a 401, a session mismatch or a stale
// token do to every record what they do to one sent alone (verdictOp,
// verdictEnd). A 413 hands the page back uncharged and halves the pages of
// this Outbox. Anything else (404, 405, 501, batch-malformed, another 4xx,
// a 2xx that is not a results document for the keys sent) says the
// receiver does not speak this batch format: the page is handed back
// uncharged and this Outbox sends one record per request from then on;
// never a dead letter, since nothing is wrong with the records.
func (f *flushRun) batchVerdict(ctx context.Context, s *pageSend, v Verdict, resp Response, serr error, now time.Time) ([]*settleOp, func() error) {
	l := f.lease
	refund := func(kind EventKind, e *queue.ErrorInfo) []*settleOp {
		return f.eachOp(s, kind, e, func(r queue.Record) (queue.Record, error) { return queue.Refund(r, l, now, e) })
	}
	st := resp.Status
	switch {
	case serr == nil && st == 413 && len(s.recs) > 1:
		f.halvePages(len(s.recs))
		e := queue.ErrorInfo{Code: CodeBatchTooLarge, Message: "batch too large: pages halved", Status: st}
		return refund(EventRetry, &e), nil
	case serr != nil || (st != 404 && st != 405 && st != 501 && v.Outcome != wire.OutcomeAck &&
		v.Outcome != wire.OutcomeTerminal && v.Outcome != wire.OutcomeConflict):
		// retry (network, 5xx, 429), auth, session or stale
		ops := make([]*settleOp, len(s.recs))
		for i, rec := range s.recs {
			ops[i] = f.verdictOp(rec, s.evs[i], v, resp, now)
		}
		return ops, func() error { return f.verdictEnd(ctx, v) }
	}
	f.o.batch.off.Store(true)
	e := queue.ErrorInfo{Code: CodeBatchUnsupported, Message: "batch endpoint answered " + strconv.Itoa(st) + ": sending one record per request", Status: st}
	return refund(EventBatchFallback, &e), nil
}

// halvePages makes this Outbox's pages half of n records (a page of n was
// refused as too large) unless they are already smaller.
func (f *flushRun) halvePages(n int) {
	want := int64(max(n/2, 1))
	for {
		cur := f.o.batch.size.Load()
		if cur != 0 && cur <= want {
			return
		}
		if f.o.batch.size.CompareAndSwap(cur, want) {
			return
		}
	}
}

// The batch flush's error codes and event.
const (
	// CodeBatchTooLarge: the receiver refused a page as too large (413);
	// its records went back uncharged and later pages are half as big.
	CodeBatchTooLarge = "batch_too_large"
	// CodeBatchUnsupported: the receiver does not speak the batch format
	// at Config.BatchEndpoint; the Outbox sends one record per request.
	CodeBatchUnsupported = "batch_unsupported"
	// EventBatchFallback: a record went back uncharged because the batch
	// endpoint does not speak the batch format (CodeBatchUnsupported).
	EventBatchFallback EventKind = "outbox.batch.fallback"
)
