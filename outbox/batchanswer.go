package outbox

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// pageAnswer is the transition of every record of s for the answer to its
// request, the verdicts whose ends (verdictEnd) follow once they are
// written, and an error that then fails the flush. A results document is
// answered mutation by mutation, each result as the record's own answer
// (queue.ResultVerdict); any other answer is the whole page's (batchVerdict).
func (f *flushRun) pageAnswer(ctx context.Context, s *pageSend, resp Response, serr error, now time.Time) ([]*settleOp, []Verdict, error) {
	l := f.lease
	if e := offline(ctx, serr); e != nil {
		return f.eachOp(s, EventOffline, e, func(r queue.Record) (queue.Record, error) { return queue.Refund(r, l, now, e) }), nil, ErrOffline
	}
	v := Classify(resp, serr, now)
	if serr != nil || v.Outcome != wire.OutcomeAck {
		ops, vs := f.batchVerdict(s, v, resp, serr, now)
		return ops, vs, nil
	}
	rs, err := wire.ParseBatchResponse(resp.Body, s.keys)
	ops := make([]*settleOp, len(rs))
	vs := make([]Verdict, 0, len(rs))
	failed := map[string]bool{} // entities with a record not acked earlier in the page
	for i := 0; err == nil && i < len(rs); i++ {
		ent := s.muts[i].Entity
		op, rv, ok := f.resultOp(s, i, rs[i], ent != "" && failed[ent], now)
		if !ok {
			err = wire.ErrBatchMalformed
			break
		}
		failed[ent] = failed[ent] || op.kind != EventAck
		ops[i] = op
		if rv != nil {
			vs = append(vs, *rv)
		}
	}
	if err != nil {
		// Not a results document for the keys sent, or a result the
		// format does not allow: none of it is believed.
		ops, vs = f.batchVerdict(s, v, resp, nil, now)
	}
	return ops, vs, nil
}

// resultOp is the transition of s.recs[i] for its result r, and the
// verdict whose end follows (nil for none); ok is false for a result the
// format does not allow (queue.ResultVerdict). A mutation not attempted after a
// failure of its entity earlier in the page (afterFailure) was not tried:
// handed back uncharged. Not attempted without one breaks the format's
// rule: retried as any retry (charged, backoff), or a server always saying
// so would be resent at once until the flush's end. A retry of problem
// server-busy (the receiver's time or answer budget ran out before it
// started) is handed back uncharged and due at once, the first in a row:
// the next in a row (LastError CodeServerBusy) is charged and backs off, so
// a server always busy costs an attempt every other try, not a resend loop.
func (f *flushRun) resultOp(s *pageSend, i int, r wire.BatchResult, afterFailure bool, now time.Time) (*settleOp, *Verdict, bool) {
	l, rec, ev := f.lease, s.recs[i], s.evs[i]
	refund := func(e *queue.ErrorInfo) *settleOp {
		ev.Reason = string(r.Outcome)
		return &settleOp{rec: rec, ev: ev, kind: EventRetry, e: e, t: func(x queue.Record) (queue.Record, error) { return queue.Refund(x, l, now, e) }}
	}
	if r.Outcome == wire.BatchNotAttempted && afterFailure {
		return refund(nil), nil, true
	}
	if r.Outcome == wire.BatchNotAttempted {
		v := Verdict{Outcome: wire.OutcomeRetry, Err: queue.ErrorInfo{Code: CodeNotAttempted, Message: "not attempted, no earlier failure of its entity"}}
		return f.verdictOp(rec, ev, v, Response{}, now), &v, true
	}
	rv, hdr, ok := queue.ResultVerdict(r, now)
	if !ok {
		return nil, nil, false
	}
	rresp := Response{Status: r.Status, Body: r.Body, Header: hdr}
	if r.Outcome == wire.BatchRetry && r.Problem == wire.ProblemBusy {
		rv.Err.Code = CodeServerBusy
		if rec.LastError == nil || rec.LastError.Code != CodeServerBusy {
			return refund(&rv.Err), nil, true
		}
	}
	return f.verdictOp(rec, ev, rv, rresp, now), &rv, true
}

// eachOp is the same transition for every record of s.
func (f *flushRun) eachOp(s *pageSend, kind EventKind, e *queue.ErrorInfo, t func(queue.Record) (queue.Record, error)) []*settleOp {
	ops := make([]*settleOp, len(s.recs))
	for i, rec := range s.recs {
		ops[i] = &settleOp{rec: rec, ev: s.evs[i], kind: kind, e: e, t: t}
	}
	return ops
}

// batchVerdict is the page's transitions, and the verdicts whose ends
// follow, for an answer that is not a results document: the whole
// request's verdict v. A network error, a 5xx or 429 (Retry-After
// honoured), a 401, a session mismatch or a stale token do to every record
// what they do to one sent alone. A 413, or an answer larger than the
// Transport reads (ErrResponseTooLarge), hands the page back uncharged and
// halves the pages of this Outbox; of a page of one record, it sends that
// record alone (sendAlone), the others still batched. Anything else (404, 405, 501,
// batch-malformed, another 4xx, a 2xx that is not a results document for
// the keys sent) says the receiver does not speak this batch format: the
// page is handed back uncharged and this Outbox sends one record per
// request from then on; never a dead letter, nothing is wrong with the
// records.
func (f *flushRun) batchVerdict(s *pageSend, v Verdict, resp Response, serr error, now time.Time) ([]*settleOp, []Verdict) {
	l := f.lease
	refund := func(kind EventKind, e *queue.ErrorInfo) []*settleOp {
		return f.eachOp(s, kind, e, func(r queue.Record) (queue.Record, error) { return queue.Refund(r, l, now, e) })
	}
	st := resp.Status
	tooLarge := (serr == nil && st == 413) || errors.Is(serr, ErrResponseTooLarge)
	switch {
	case tooLarge && len(s.recs) == 1:
		// The record itself may be too large: it goes alone, and its
		// own answer decides, as today's single sends.
		s.alone = append(s.alone, aloneSend{rec: s.recs[0], part: s.parts[0], ev: s.evs[0], body: s.muts[0].Payload})
		return nil, nil
	case tooLarge:
		// A request or an answer too large (the Transport's response
		// cap, ErrResponseTooLarge): the same page cut in half fits.
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
		return ops, []Verdict{v}
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
		if (cur != 0 && cur <= want) || f.o.batch.size.CompareAndSwap(cur, want) {
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
	// CodeNotAttempted: the receiver did not attempt a mutation although
	// no earlier one of its entity failed in the batch; retried.
	CodeNotAttempted = "not_attempted"
	// CodeServerBusy: the receiver's batch ran out of time or answer room
	// before the mutation started (problem server-busy).
	CodeServerBusy = "server_busy"
	// EventBatchFallback: a record went back uncharged because the batch
	// endpoint does not speak the batch format (CodeBatchUnsupported).
	EventBatchFallback EventKind = "outbox.batch.fallback"
)
