package outbox

import (
	"context"
	"errors"

	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// pageSend is a charged page as it is sent: the records in the request, in
// order, with their parts and events, and the charged records left out
// (their lane stopped before them), which are taken back unsent.
type pageSend struct {
	recs   []queue.Record
	parts  []*pagePart // recs[i]'s part
	evs    []Event
	keys   []string
	muts   []wire.BatchMutation
	unsent []queue.Record
	alone  []aloneSend // sent by the single path instead (sendAlone)
	bytes  int         // the request body's size so far, about
}

// aloneSend is a charged record of a page that goes alone, the first of
// its part: its body would not survive the batch document (wire.BatchSafe),
// or a page of it alone was refused as too large.
type aloneSend struct {
	rec  queue.Record
	part *pagePart
	ev   Event
	body []byte
}

// sendPage charges p in one transaction, sends it as one request and
// writes every record's outcome in one more (or with the next page's
// charge). A fatal error fails the flush.
func (f *flushRun) sendPage(ctx context.Context, p *page) {
	f.chargePage(ctx, p)
	s := f.preparePage(ctx, p)
	defer f.sendAlone(ctx, s)
	if len(s.recs) == 0 || f.ending(ctx) {
		s.unsent = append(s.unsent, s.recs...)
		if err := f.writePage(ctx, s, nil, false); err != nil {
			f.fail(err)
		}
		return
	}
	req := Request{Method: "POST", Endpoint: f.o.cfg.BatchEndpoint, Header: f.header(f.session.UserID),
		Body: wire.AppendBatchRequest(nil, s.muts), UserID: f.session.UserID}
	resp, serr := f.o.cfg.Transport.Send(ctx, req)
	f.count(func(r *FlushReport) { r.Requests++ }, nil)
	now := f.o.cfg.Clock.Now()
	ops, vs, err := f.pageAnswer(ctx, s, resp, serr, now)
	werr := f.writePage(ctx, s, ops, err == nil)
	if len(vs) == 0 && werr != nil {
		f.fail(werr)
	}
	ended := map[wire.Outcome]bool{}
	for _, v := range vs {
		if !ended[v.Outcome] {
			ended[v.Outcome] = true
			if err := f.endAfter(ctx, v, werr); err != nil {
				f.fail(err)
			}
		}
	}
	if err != nil {
		f.fail(err)
	}
}

// chargePage charges every record of p in one transaction (chargeUpdate),
// each lane's part a chain of its own: a record that cannot be charged
// stops its lane there, not the page. The records not charged are
// released (the claim wrote nothing for them). The transaction begins with
// the acks of the clean pages answered since the last write (pageAcks,
// writePage); if one of them was not made nothing is charged, as its
// lane's next record may be in this page.
func (f *flushRun) chargePage(ctx context.Context, p *page) {
	now := f.o.cfg.Clock.Now()
	f.mu.Lock()
	acks := f.pageAcks
	f.pageAcks = nil
	f.mu.Unlock()
	ups, acked, cctx := ackUpdates(ctx, acks, 0)
	chains := make([]bool, len(p.parts))
	for i, part := range p.parts {
		chains[i] = true
		for _, rec := range part.Records {
			ups = append(ups, f.chargeUpdate(ctx, rec, now, &chains[i], acked))
		}
	}
	res, err := f.commit(cctx, ups)
	if err != nil {
		if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
			f.fail(err)
		}
		f.released(len(ups) - len(acks))
		return
	}
	if err := f.settleAcks(acks, res); err != nil {
		f.fail(err)
	}
	k := len(acks)
	for _, part := range p.parts {
		for _, m := range res[k : k+len(part.Records)] {
			if m.Err != nil {
				if !chargeStops(ctx, m.Err) {
					f.fail(m.Err)
				}
				break
			}
			part.charged = append(part.charged, m.Record)
		}
		k += len(part.Records)
		f.released(len(part.Records) - len(part.charged))
	}
}

// preparePage builds the mutations of p's charged records, at most
// BatchMaxBytes of them. A record whose
// body cannot be made is settled by body, and its lane's later records are
// left out; a record that may not be sent under this flush's session
// (sendable) fails the flush, and nothing of the page is sent.
func (f *flushRun) preparePage(ctx context.Context, p *page) *pageSend {
	s := &pageSend{}
	now := f.o.cfg.Clock.Now()
	for _, part := range p.parts {
		for j, rec := range part.charged {
			if f.stopped() == nil && !f.sendable(&rec) {
				// The transport attaches the current session's
				// credentials: never send a record under another
				// user's session (session.go).
				f.fail(ErrSessionChanged)
			}
			if f.stopped() != nil {
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
			m := wire.BatchMutation{Key: rec.IdempotencyKey, Endpoint: ep, OperationID: rec.ID,
				Operation: rec.OperationType, Entity: batchEntity(&rec), Payload: body}
			size := len(wire.AppendBatchRequest(nil, []wire.BatchMutation{m}))
			if !wire.BatchSafe(body) || size > f.o.cfg.BatchMaxBytes {
				// Not bytes a batch carries as they are, or more
				// than a batch may hold: sent alone when first of
				// its part, else its lane is cut here and a later
				// page starts with it.
				rest := part.charged[j:]
				if j == 0 {
					s.alone, rest = append(s.alone, aloneSend{rec: rec, part: part, ev: ev, body: body}), rest[1:]
				}
				s.unsent = append(s.unsent, rest...)
				break
			}
			if s.bytes += size; s.bytes > f.o.cfg.BatchMaxBytes {
				// The page is full: its lane goes on in a later one.
				s.bytes -= size
				s.unsent = append(s.unsent, part.charged[j:]...)
				break
			}
			s.recs, s.parts, s.evs = append(s.recs, rec), append(s.parts, part), append(s.evs, ev)
			s.keys, s.muts = append(s.keys, rec.IdempotencyKey), append(s.muts, m)
		}
	}
	if f.stopped() != nil {
		s.unsent, s.recs = append(s.unsent, s.recs...), nil
	}
	return s
}

// sendAlone sends s.alone by the single path (sendBody), each answered as
// that record's own, once the page is written; it counts as acked in its
// part when it was. Each is first of its part, the rest of which was not
// sent, so its entity is in no other request. The flush ending takes them
// back unsent.
func (f *flushRun) sendAlone(ctx context.Context, s *pageSend) {
	for _, a := range s.alone {
		if f.ending(ctx) {
			f.writeBack(ctx, nil, []queue.Record{a.rec})
			continue
		}
		op, err := f.sendBody(ctx, a.rec, a.ev, a.body)
		if err != nil {
			f.fail(err)
		}
		if op == nil {
			continue
		}
		if res := f.writeBack(ctx, []*settleOp{op}, nil); len(res) == 1 && res[0].Err == nil && res[0].Record.Status == queue.StatusAcked {
			a.part.acked++
		}
	}
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

// writePage writes ops (s.recs' outcomes, in order) and takes back
// s.unsent in one transaction (writeBack), and marks how many of each
// part's records, from the first, were acked. A clean page (mayDefer, only
// acks, nothing unsent) is not written here: its acks wait in pageAcks for
// the charge of the page runPages starts next (one transaction per page
// instead of two, as a lane's acks ride with its next charge), or for
// writeAcks when runPages starts none. A crash before that leaves them in
// flight, charged: recovered after their lease and resent, answered from
// their keys. So a record at its last attempt is never deferred: recovered,
// it would be a dead letter although the receiver applied it. The write's
// error is returned, not failed: the verdict decides (endAfter).
func (f *flushRun) writePage(ctx context.Context, s *pageSend, ops []*settleOp, mayDefer bool) error {
	clean := mayDefer && len(s.unsent) == 0 && len(ops) > 0
	for _, op := range ops {
		clean = clean && op.kind == EventAck && (op.rec.MaxAttempts <= 0 || op.rec.Attempts < op.rec.MaxAttempts)
	}
	if clean {
		for _, part := range s.parts {
			part.acked++
		}
		f.mu.Lock()
		f.pageAcks = append(f.pageAcks, ops...)
		f.mu.Unlock()
		return nil
	}
	res, err := f.writeBackErr(ctx, ops, s.unsent)
	var prev *pagePart
	broken := false
	for i, r := range res {
		part := s.parts[i]
		if part != prev {
			prev, broken = part, false
		}
		broken = broken || r.Err != nil || r.Record.Status != queue.StatusAcked
		if !broken {
			part.acked++
		}
	}
	return err
}

// writeAcks writes the deferred acks no page's charge took.
func (f *flushRun) writeAcks(ctx context.Context) {
	f.mu.Lock()
	acks := f.pageAcks
	f.pageAcks = nil
	f.mu.Unlock()
	f.writeBack(ctx, acks, nil)
}
