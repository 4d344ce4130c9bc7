package outbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tabfence/tabfence/internal/deadline"
	"github.com/tabfence/tabfence/outbox/queue"
)

// FlushReport summarises one Flush.
type FlushReport struct {
	// Batches is the claims the flush made (each of up to BatchSize due
	// records), not batch requests: Requests counts those.
	Batches, Claimed, Acked, Retried, DeadLettered, Terminal, Conflicts, Released int
	// Requests is the HTTP requests the flush made, single or batch.
	Requests int
	// More: the flush stopped at its deadline (MaxFlushDuration), not
	// because nothing was due: due records may be left.
	More bool
}

// flushRun is the state one Flush shares between its lanes.
type flushRun struct {
	o        *Outbox
	lease    queue.Lease
	session  Session
	deadline time.Time

	mu      sync.Mutex
	stop    error // first fatal error: step down, auth, stale owner
	report  FlushReport
	lastErr *queue.ErrorInfo
	health  flushHealth
	// authAsked: OnAuthRequired was called in this flush already.
	authAsked bool

	gc groupCommit // commit's state (Concurrency > 1)
	// pageAcks: the acks of pages whose every record was acked, not yet
	// written: the next page's charge writes them (batchpage.go).
	pageAcks []*settleOp
}

func (f *flushRun) stopped() error {
	f.mu.Lock()
	err := f.stop
	f.mu.Unlock()
	return err
}

func (f *flushRun) fail(err error) {
	f.mu.Lock()
	if f.stop == nil {
		f.stop = err
	}
	f.mu.Unlock()
}

func (f *flushRun) count(fn func(r *FlushReport), e *queue.ErrorInfo) {
	f.mu.Lock()
	fn(&f.report)
	if e != nil {
		c := *e
		f.lastErr = &c
	}
	f.mu.Unlock()
}

// Flush sends due records of the current user under lease until the queue is
// drained, the deadline (MaxFlushDuration) passes, or ownership is lost. The
// caller must hold the flush lock (Web Lock or lease) and have set
// lease.Resource/FenceToken. It returns queue.ErrStaleOwner (another owner took
// over: nothing was changed after that), a *StepDownError (the server saw a
// higher fencing token: release the lock), ErrAuthRequired (401: the user's
// queue is paused), ErrPaused, ErrNoSession, ErrSessionChanged (the queue's
// session is not this tab's view of it, or changed during the flush: see
// session.go) or ErrSessionMismatch. Records claimed but not sent are handed
// back uncharged.
func (o *Outbox) Flush(ctx context.Context, lease queue.Lease) (FlushReport, error) {
	start := o.cfg.Clock.Now()
	s, meta, err := o.flushSession(ctx)
	if err != nil {
		return FlushReport{}, err
	}
	if meta.Paused || contains(meta.AuthPaused, s.UserID) {
		return FlushReport{}, ErrPaused
	}
	o.emit(Event{Kind: EventFlushStart, At: start, Owner: lease.Owner, LeaseToken: lease.Token})
	ctx, cancel := deadline.WithTimeout(ctx, o.cfg.MaxFlushDuration)
	defer cancel()
	f := &flushRun{o: o, lease: lease, session: s, deadline: start.Add(o.cfg.MaxFlushDuration)}
	err = f.loop(ctx)
	end := o.cfg.Clock.Now()
	f.mu.Lock()
	rep, lastErr, health := f.report, f.lastErr, f.health
	f.mu.Unlock()
	if !errors.Is(err, queue.ErrStaleOwner) {
		// A stale owner leaves even the metadata alone.
		_, _ = o.cfg.Store.UpdateMeta(context.WithoutCancel(ctx), func(m *Meta) error {
			m.LastFlushAt = end
			health.apply(m, end)
			if lastErr != nil && !m.Failure.Failing() {
				m.LastError = lastErr
			}
			return nil
		})
	}
	ev := Event{Kind: EventFlushEnd, At: end, Owner: lease.Owner, LeaseToken: lease.Token, Duration: end.Sub(start)}
	if err != nil {
		ev.Reason = queue.Short(err.Error())
	}
	o.emit(ev)
	return rep, err
}

func (f *flushRun) loop(ctx context.Context) error {
	o := f.o
	for {
		now := o.cfg.Clock.Now()
		if !now.Before(f.deadline) || ctx.Err() != nil {
			f.count(func(r *FlushReport) { r.More = true }, nil)
			return nil
		}
		if _, err := o.cfg.Store.UpdateLease(ctx, o.lockName, queue.RenewLease(f.lease, now, o.cfg.LeaseTTL)); err != nil {
			return err
		}
		heard := o.heard.Load()
		meta, err := o.cfg.Store.UpdateMeta(ctx, func(*Meta) error { return nil })
		if err != nil {
			return err
		}
		if meta.Paused {
			return ErrPaused
		}
		if err := f.checkSession(meta, heard); err != nil {
			return err
		}
		recs, err := o.cfg.Store.Claim(ctx, queue.ClaimRequest{
			Lease: f.lease, Now: now, Limit: f.claimLimit(), LeaseTTL: o.cfg.LeaseTTL,
			UserID: f.session.UserID, TenantID: f.session.TenantID,
			Schema: o.SchemaGate(), Paused: meta.AuthPaused,
			Reconnected: o.reconnectedAt(),
		})
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		f.count(func(r *FlushReport) { r.Batches++; r.Claimed += len(recs) }, nil)
		for i := range recs {
			o.emit(Event{Kind: EventClaim, At: now, RecordID: recs[i].ID, OperationKeyHash: HashKey(recs[i].OperationKey),
				Owner: f.lease.Owner, LeaseToken: f.lease.Token, Attempt: recs[i].Attempts + 1})
		}
		if f.batching() {
			f.runBatches(ctx, recs)
		} else {
			f.runLanes(ctx, queue.Lanes(recs))
		}
		if err := f.stopped(); err != nil {
			return err
		}
	}
}

// runLanes sends lanes with at most Concurrency at once; each lane is sent in
// order and stops at its first record that is not acked. Concurrency 1 runs
// inline without goroutines (deterministic, as the simulation needs).
func (f *flushRun) runLanes(ctx context.Context, lanes [][]queue.Record) {
	workers := f.o.cfg.Concurrency
	if workers > len(lanes) {
		workers = len(lanes)
	}
	if workers <= 1 {
		for _, l := range lanes {
			f.runLane(ctx, l)
		}
		return
	}
	var (
		mu   sync.Mutex
		next int
		wg   sync.WaitGroup
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(lanes) {
					return
				}
				f.runLane(ctx, lanes[i])
			}
		}()
	}
	wg.Wait()
}

// ending reports whether the flush is ending: failed, its context done or
// its deadline passed.
func (f *flushRun) ending(ctx context.Context) bool {
	return f.stopped() != nil || ctx.Err() != nil || !f.o.cfg.Clock.Now().Before(f.deadline)
}
