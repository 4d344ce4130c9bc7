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
// request, and its answer, every mutation's result, written in one more
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

// batchLane is one entity's claimed records in a batch flush.
type batchLane struct {
	recs    []queue.Record
	next    int  // recs[next:] are in no page yet
	busy    bool // a page in flight holds some of its records
	stopped bool // a record was not acked: the rest waits for a later claim
}

// pagePart is a lane's records in one page.
type pagePart struct {
	lane    *batchLane
	recs    []queue.Record // what the page asked for, in order
	charged []queue.Record // the prefix of recs charged
	acked   int            // how many of charged, from the first, were acked
}

// page is one batch request's records, by lane.
type page struct{ parts []*pagePart }

// runBatches sends a claim's records in pages. A lane holding a record that
// cannot go in a batch (batchPath) is sent by the single flush's lanes,
// whole, after the pages: its order needs no interleaving with them.
func (f *flushRun) runBatches(ctx context.Context, recs []queue.Record) {
	var lanes []*batchLane
	var alone [][]queue.Record
	for _, l := range queue.Lanes(recs) {
		if f.batchable(l) {
			lanes = append(lanes, &batchLane{recs: l})
		} else {
			alone = append(alone, l)
		}
	}
	f.runPages(ctx, lanes)
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

// batchPath is rec's endpoint as a batch mutation names it: the path and
// query it would be POSTed to alone (wire.ValidEndpoint). An absolute URL
// counts only when it is of the batch endpoint's own origin; any other
// (another host, a relative batch endpoint whose origin is unknown here)
// is sent alone, where it would go.
func (f *flushRun) batchPath(rec *queue.Record) (string, bool) {
	ep := f.endpoint(rec)
	if wire.ValidEndpoint(ep) {
		return ep, true
	}
	origin, path, ok := splitURL(ep)
	if !ok {
		return "", false
	}
	bo, _, ok := splitURL(f.o.cfg.BatchEndpoint)
	if !ok || !equalFoldASCII(origin, bo) || !wire.ValidEndpoint(path) {
		return "", false
	}
	return path, true
}

// splitURL splits an absolute http(s) URL into its origin (scheme://host)
// and its path with query, the fragment dropped ("/" when the path is
// empty). It is not net/url, whose dependencies the wasm download would
// carry for this one use.
func splitURL(u string) (origin, path string, ok bool) {
	n := 0
	switch {
	case len(u) > 7 && equalFoldASCII(u[:7], "http://"):
		n = 7
	case len(u) > 8 && equalFoldASCII(u[:8], "https://"):
		n = 8
	default:
		return "", "", false
	}
	end := len(u)
	for i := n; i < len(u); i++ {
		if c := u[i]; c == '/' || c == '?' || c == '#' {
			end = i
			break
		}
	}
	if end == n {
		return "", "", false
	}
	origin, path = u[:end], u[end:]
	for i := 0; i < len(path); i++ {
		if path[i] == '#' {
			path = path[:i]
			break
		}
	}
	if path == "" || path[0] == '?' {
		path = "/" + path
	}
	return origin, path, true
}

// runPages sends lanes in pages, at most Concurrency in flight; each
// finished page frees its lanes for the next. Concurrency 1 runs inline,
// without goroutines (the simulation's determinism).
func (f *flushRun) runPages(ctx context.Context, lanes []*batchLane) {
	workers := max(f.o.cfg.Concurrency, 1)
	done := make(chan *page, workers)
	inflight := 0
	for {
		for inflight < workers && f.batching() && !f.ending(ctx) {
			p := f.nextPage(lanes)
			if p == nil {
				break
			}
			if workers == 1 {
				f.sendPage(ctx, p)
				pageDone(p)
				continue
			}
			inflight++
			go func() {
				f.sendPage(ctx, p)
				done <- p
			}()
		}
		if inflight == 0 {
			break
		}
		pageDone(<-done)
		inflight--
	}
	for _, l := range lanes {
		f.released(len(l.recs) - l.next)
	}
}

// nextPage forms a page from the lanes that are free, in claim order: each
// gives its records in order up to the room left, the last one cut there.
// nil: no lane is free.
func (f *flushRun) nextPage(lanes []*batchLane) *page {
	room := f.pageSize()
	var p page
	for _, l := range lanes {
		if room == 0 {
			break
		}
		if l.busy || l.stopped || l.next == len(l.recs) {
			continue
		}
		k := min(room, len(l.recs)-l.next)
		p.parts = append(p.parts, &pagePart{lane: l, recs: l.recs[l.next : l.next+k]})
		l.next += k
		l.busy = true
		room -= k
	}
	if len(p.parts) == 0 {
		return nil
	}
	return &p
}

// pageDone frees p's lanes: a lane goes on only if every record of its
// part was acked.
func pageDone(p *page) {
	for _, part := range p.parts {
		part.lane.busy = false
		if part.acked < len(part.recs) {
			part.lane.stopped = true
		}
	}
}
