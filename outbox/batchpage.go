package outbox

import (
	"context"
	"errors"

	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// pageSend is a charged page as it is sent: the records in the request,
// in order, with their events, and the charged ones left out (their
// lane stopped before them), which are taken back unsent.
type pageSend struct {
	recs   []queue.Record
	parts  []*pagePart // recs[i]'s part
	evs    []Event
	keys   []string
	muts   []wire.BatchMutation
	unsent []queue.Record
}

// sendPage charges p in one transaction, sends it in one request and
// writes every record's outcome in one more. A fatal error fails the flush.
func (f *flushRun) sendPage(ctx context.Context, p *page) {
	f.chargePage(ctx, p)
	s := f.preparePage(ctx, p)
	if len(s.recs) == 0 || f.ending(ctx) {
		s.unsent = append(s.unsent, s.recs...)
		f.writePage(ctx, s, nil, nil)
		return
	}
	req := Request{
		Method: "POST", Endpoint: f.o.cfg.BatchEndpoint, Header: f.header(f.session.UserID),
		Body: wire.AppendBatchRequest(make([]byte, 0, batchBodySize(s.muts)), s.muts), UserID: f.session.UserID,
	}
	resp, serr := f.o.cfg.Transport.Send(ctx, req)
	f.count(func(r *FlushReport) { r.Requests++ }, nil)
	f.answerPage(ctx, s, resp, serr)
}

// chargePage charges every record of p in one transaction (chargeUpdate),
// each lane's part a chain of its own: a record that cannot be charged
// stops its lane there, not the page. The records not charged are
// released (the claim wrote nothing for them).
func (f *flushRun) chargePage(ctx context.Context, p *page) {
	now := f.o.cfg.Clock.Now()
	chains := make([]bool, len(p.parts))
	var ups []RecordUpdate
	for i, part := range p.parts {
		chains[i] = true
		for _, rec := range part.recs {
			ups = append(ups, f.chargeUpdate(ctx, rec, now, &chains[i], nil))
		}
	}
	res, err := f.commit(ctx, ups)
	if err != nil {
		if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
			f.fail(err)
		}
		f.released(len(ups))
		return
	}
	k := 0
	for _, part := range p.parts {
		for _, m := range res[k : k+len(part.recs)] {
			if m.Err != nil {
				if !chargeStops(ctx, m.Err) {
					f.fail(m.Err)
				}
				break
			}
			part.charged = append(part.charged, m.Record)
		}
		k += len(part.recs)
		f.released(len(part.recs) - len(part.charged))
	}
}

// preparePage builds the mutations of p's charged records. A record whose
// body cannot be made is settled by body, and its lane's later records are
// left out; a record that may not be sent under this flush's session
// (sendable) fails the flush, and nothing of the page is sent.
func (f *flushRun) preparePage(ctx context.Context, p *page) *pageSend {
	s := &pageSend{}
	now := f.o.cfg.Clock.Now()
	for _, part := range p.parts {
		for j, rec := range part.charged {
			if f.stopped() != nil {
				s.unsent = append(s.unsent, part.charged[j:]...)
				break
			}
			if !f.sendable(&rec) {
				// The transport attaches the current session's
				// credentials: never send a record under another
				// user's session (session.go).
				f.fail(ErrSessionChanged)
				s.unsent = append(s.unsent, part.charged[j:]...)
				break
			}
			ev := f.recordEvent(rec)
			body, ok, err := f.body(ctx, rec, ev, now)
			if err != nil {
				f.fail(err)
			}
			if !ok {
				s.unsent = append(s.unsent, part.charged[j+1:]...)
				break
			}
			ep, _ := f.batchPath(&rec)
			s.recs = append(s.recs, rec)
			s.parts = append(s.parts, part)
			s.evs = append(s.evs, ev)
			s.keys = append(s.keys, rec.IdempotencyKey)
			s.muts = append(s.muts, wire.BatchMutation{
				Key: rec.IdempotencyKey, Endpoint: ep, OperationID: rec.ID,
				Operation: rec.OperationType, Entity: batchEntity(&rec), Payload: body,
			})
		}
	}
	if f.stopped() != nil {
		s.unsent = append(s.unsent, s.recs...)
		s.recs = nil
	}
	return s
}

// recordEvent is the event template of a charged record's send.
func (f *flushRun) recordEvent(rec queue.Record) Event {
	return Event{RecordID: rec.ID, OperationKeyHash: HashKey(rec.OperationKey), Owner: f.lease.Owner, LeaseToken: f.lease.Token, Attempt: rec.Attempts}
}

// batchEntity is the ordering key a mutation carries: its entity within
// the batch's user and tenant, "" for a record without one (its own lane).
// Two entities whose names join alike would only stop each other after a
// failure, never reorder.
func batchEntity(rec *queue.Record) string {
	if rec.EntityID == "" {
		return ""
	}
	return rec.EntityType + ":" + rec.EntityID
}

// batchBodySize is about the size of the request document of ms.
func batchBodySize(ms []wire.BatchMutation) int {
	n := 16
	for i := range ms {
		m := &ms[i]
		n += 64 + len(m.Key) + len(m.Endpoint) + len(m.OperationID) + len(m.Operation) + len(m.Entity) + len(m.Payload)
	}
	return n
}

// answerPage acts on the answer to a page's request: every record's
// transition and the page's end (pageAnswer) are written in one
// transaction (writePage).
func (f *flushRun) answerPage(ctx context.Context, s *pageSend, resp Response, serr error) {
	now := f.o.cfg.Clock.Now()
	ops, end := f.pageAnswer(ctx, s, resp, serr, now)
	f.writePage(ctx, s, ops, end)
}

// writePage writes ops (s.recs' outcomes, in order) and takes back
// s.unsent in one transaction, counts and emits each, marks which of each
// part's records were acked, and then does the page's end: end (if not
// nil) runs after the write and its error fails the flush.
func (f *flushRun) writePage(ctx context.Context, s *pageSend, ops []*settleOp, end func() error) {
	now := f.o.cfg.Clock.Now()
	ups := make([]RecordUpdate, 0, len(ops)+len(s.unsent))
	for _, op := range ops {
		ups = append(ups, op.update(nil))
	}
	for i := range s.unsent {
		ups = append(ups, RecordUpdate{ID: s.unsent[i].ID, Fn: apply(func(r queue.Record) (queue.Record, error) { return queue.Unsend(r, f.lease, now) })})
	}
	if len(ups) > 0 {
		res, err := f.commit(context.WithoutCancel(ctx), ups)
		if err != nil {
			f.fail(err)
			return
		}
		broken := map[*pagePart]bool{}
		for i, op := range ops {
			if err := f.settled(op, res[i]); err != nil {
				f.fail(err)
			}
			part := s.parts[i]
			if !broken[part] && res[i].Err == nil && res[i].Record.Status == queue.StatusAcked {
				part.acked++
			} else {
				broken[part] = true
			}
		}
		n := 0
		for _, u := range res[len(ops):] {
			if u.Err == nil {
				n++
			}
		}
		f.released(n)
	}
	if end != nil {
		if err := end(); err != nil {
			f.fail(err)
		}
	}
}
