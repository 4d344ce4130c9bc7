package outbox

import (
	"context"
	"sync"
)

// commit runs ups as one Store.UpdateBatch under the lease. With concurrent
// lanes it is a group commit: while one batch is in its transaction, the
// changes other lanes submit queue up and go together in the next one, so
// eight lanes cost about as many transactions as one. Each caller gets its
// own results; a batch-level error (stale lease, storage failure) is every
// caller's. Concurrency 1 calls the store directly (deterministic).
func (f *flushRun) commit(ctx context.Context, ups []RecordUpdate) ([]UpdateResult, error) {
	if f.o.cfg.Concurrency <= 1 {
		return f.o.cfg.Store.UpdateBatch(ctx, f.lease, ups)
	}
	c := &f.gc
	p := &commitReq{ctx: ctx, ups: ups, done: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, p)
	if c.busy {
		c.mu.Unlock()
		if h := testHookQueued; h != nil {
			h()
		}
		<-p.done
		if !p.lead {
			return p.res, p.err
		}
		c.mu.Lock()
	}
	// p leads: it commits everything queued so far (itself included).
	c.busy = true
	batch := c.queue
	c.queue = nil
	c.mu.Unlock()
	f.commitBatch(batch)
	c.mu.Lock()
	if len(c.queue) > 0 {
		// Hand the lead to the first waiter rather than committing the
		// others' changes here: this lane has its own record to send.
		next := c.queue[0]
		next.lead = true
		close(next.done)
	} else {
		c.busy = false
	}
	c.mu.Unlock()
	return p.res, p.err
}

// testHookQueued, set by tests, is called when a commit request queues
// behind a batch in progress.
var testHookQueued func()

// groupCommit is the state of commit's group commit.
type groupCommit struct {
	mu    sync.Mutex
	busy  bool // a batch is being committed (or a lead handed over)
	queue []*commitReq
}

type commitReq struct {
	ctx  context.Context
	ups  []RecordUpdate
	res  []UpdateResult
	err  error
	lead bool // woken to commit the queue, not with its results
	done chan struct{}
}

// commitBatch commits the requests of batch in one UpdateBatch. A request
// whose context ended is left out (ctx.Err() is its error); the others'
// writes go ahead regardless of their callers' contexts, which they checked
// when they asked. Every request but a lead one (the caller) is woken.
func (f *flushRun) commitBatch(batch []*commitReq) {
	var ups []RecordUpdate
	var in []*commitReq
	for _, p := range batch {
		if err := p.ctx.Err(); err != nil {
			p.err = err
			continue
		}
		ups = append(ups, p.ups...)
		in = append(in, p)
	}
	if len(ups) > 0 {
		res, err := f.o.cfg.Store.UpdateBatch(context.WithoutCancel(f.ctxOf(in)), f.lease, ups)
		k := 0
		for _, p := range in {
			if err != nil {
				p.err = err
				continue
			}
			p.res = res[k : k+len(p.ups) : k+len(p.ups)]
			k += len(p.ups)
		}
	}
	for _, p := range batch {
		if !p.lead {
			close(p.done)
		}
	}
}

// ctxOf returns a context of the batch for the store call's values.
func (f *flushRun) ctxOf(in []*commitReq) context.Context {
	if len(in) > 0 {
		return in[0].ctx
	}
	return context.Background()
}
