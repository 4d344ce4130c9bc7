package outbox

import (
	"context"
	"sync/atomic"

	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// The batch flush (Config.BatchEndpoint). A claim's lanes are cut into
// pages of at most BatchMax records, each page one request of the wire
// batch format. The per-entity order of the single flush holds: a lane's
// records go in order, and a lane that does not fit in the room left in a
// page is cut there, its rest waiting for that page's results, so an
// entity is never in two requests in flight; up to Concurrency pages are
// in flight at once. A page is charged in one transaction, sent as one
// request, and its answer, every mutation's result, written in one more,
// or with the next page's charge when every record was acked
// (batchpage.go). Every result goes through the single send's rules
// (Classify, verdictOp): a mutation's answer does to its record what the
// same answer to the record sent alone would do.

// batchState is what an Outbox learnt of its batch endpoint, for every
// later flush: that the receiver does not speak the batch format (off),
// or that it refused pages as too large (size, 0 until then: BatchMax).
type batchState struct {
	off  atomic.Bool
	size atomic.Int64
}

// batching reports whether this flush sends batches.
func (f *flushRun) batching() bool {
	return f.o.cfg.BatchEndpoint != "" && !f.o.batch.off.Load()
}

// pageSize is the records per page now: BatchMax, or less after a 413.
func (f *flushRun) pageSize() int {
	if n := f.o.batch.size.Load(); n > 0 {
		return int(n)
	}
	return f.o.cfg.BatchMax
}

// claimLimit is the records per claim: BatchSize, or, when batching,
// enough for Concurrency full pages (a smaller claim would cap every page
// at its size).
func (f *flushRun) claimLimit() int {
	if f.batching() {
		return max(f.o.cfg.BatchSize, f.pageSize()*max(f.o.cfg.Concurrency, 1))
	}
	return f.o.cfg.BatchSize
}

// pagePart is a lane's records in one page, as the flush works them.
type pagePart struct {
	queue.PagePart
	charged []queue.Record // the prefix of Records charged
	acked   int            // how many of charged, from the first, were acked
}

// page is one batch request's records, by lane.
type page struct{ parts []*pagePart }

// runBatches sends a claim's records in pages. A lane holding a record that
// cannot go in a batch (batchPath) is sent by the single flush's lanes,
// whole, after the pages: its order needs no interleaving with them.
func (f *flushRun) runBatches(ctx context.Context, recs []queue.Record) {
	var lanes, alone [][]queue.Record
	for _, l := range queue.Lanes(recs) {
		if f.batchable(l) {
			lanes = append(lanes, l)
		} else {
			alone = append(alone, l)
		}
	}
	f.runPages(ctx, queue.NewPager(lanes))
	if f.stopped() != nil {
		for _, l := range alone {
			f.released(len(l))
		}
		return
	}
	f.runLanes(ctx, alone)
}

// batchable reports whether every record of lane can go in a batch.
func (f *flushRun) batchable(lane []queue.Record) bool {
	for i := range lane {
		if _, ok := f.batchPath(&lane[i]); !ok {
			return false
		}
	}
	return true
}

// batchPath is rec's endpoint as a batch mutation names it: wire.BatchPath
// of where the Transport sends the batch and rec alone (Resolver).
func (f *flushRun) batchPath(rec *queue.Record) (string, bool) {
	b, ep := f.o.cfg.BatchEndpoint, f.endpoint(rec)
	if r, ok := f.o.cfg.Transport.(Resolver); ok {
		b, ep = r.Resolve(b), r.Resolve(ep)
	}
	return wire.BatchPath(b, ep)
}

// runPages sends the pages of pg, at most Concurrency in flight; each
// answered page frees its lanes for the next. A clean page's acks ride
// with the charge of the page started after it (writePage), or are written
// at once when none is. Concurrency 1 runs inline, without goroutines (the
// simulation's determinism).
func (f *flushRun) runPages(ctx context.Context, pg *queue.Pager) {
	workers := max(f.o.cfg.Concurrency, 1)
	done := make(chan *page, workers)
	inflight := 0
	for {
		charged := false // a page was started since the last one answered
		for inflight < workers && f.batching() && !f.ending(ctx) {
			parts := pg.Next(f.pageSize())
			if parts == nil {
				break
			}
			p := &page{parts: make([]*pagePart, len(parts))}
			for i := range parts {
				p.parts[i] = &pagePart{PagePart: parts[i]}
			}
			charged = true
			if workers == 1 {
				f.sendPage(ctx, p)
				pageDone(pg, p)
				charged = false
				continue
			}
			inflight++
			go func() {
				f.sendPage(ctx, p)
				done <- p
			}()
		}
		if !charged {
			// No charge takes the acks of the pages answered: written
			// now, not when the slowest page in flight is answered.
			f.writeAcks(ctx)
		}
		if inflight == 0 {
			break
		}
		pageDone(pg, <-done)
		inflight--
	}
	f.writeAcks(ctx)
	f.released(pg.Unpaged())
}

// pageDone frees p's lanes in pg.
func pageDone(pg *queue.Pager, p *page) {
	for _, part := range p.parts {
		pg.Done(part.PagePart, part.acked)
	}
}
