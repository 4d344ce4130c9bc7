package outbox

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tabfence/tabfence/internal/wire"
)

// FlushReport summarises one Flush.
type FlushReport struct {
	Batches, Claimed, Acked, Retried, DeadLettered, Terminal, Conflicts, Released int
}

// flushRun is the state one Flush shares between its lanes.
type flushRun struct {
	o        *Outbox
	lease    Lease
	session  Session
	deadline time.Time

	mu      sync.Mutex
	stop    error // first fatal error: step down, auth, stale owner
	report  FlushReport
	lastErr *ErrorInfo
	// authAsked: OnAuthRequired was called in this flush already.
	authAsked bool
}

func (f *flushRun) stopped() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stop
}

func (f *flushRun) fail(err error) {
	f.mu.Lock()
	if f.stop == nil {
		f.stop = err
	}
	f.mu.Unlock()
}

func (f *flushRun) count(fn func(r *FlushReport), e *ErrorInfo) {
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
// lease.Resource/FenceToken. It returns ErrStaleOwner (another owner took
// over: nothing was changed after that), a *StepDownError (the server saw a
// higher fencing token: release the lock), ErrAuthRequired (401: the user's
// queue is paused), ErrPaused or ErrNoSession. Records claimed but not sent
// are handed back uncharged.
func (o *Outbox) Flush(ctx context.Context, lease Lease) (FlushReport, error) {
	s := o.Session()
	if s.UserID == "" {
		return FlushReport{}, ErrNoSession
	}
	start := o.cfg.Clock.Now()
	meta, err := o.cfg.Store.UpdateMeta(ctx, func(*Meta) error { return nil })
	if err != nil {
		return FlushReport{}, err
	}
	if meta.Paused || contains(meta.AuthPaused, s.UserID) {
		return FlushReport{}, ErrPaused
	}
	o.emit(Event{Kind: EventFlushStart, At: start, Owner: lease.Owner, LeaseToken: lease.Token})
	ctx, cancel := context.WithTimeout(ctx, o.cfg.MaxFlushDuration)
	defer cancel()
	f := &flushRun{o: o, lease: lease, session: s, deadline: start.Add(o.cfg.MaxFlushDuration)}
	err = f.loop(ctx)
	end := o.cfg.Clock.Now()
	f.mu.Lock()
	rep, lastErr := f.report, f.lastErr
	f.mu.Unlock()
	if !errors.Is(err, ErrStaleOwner) {
		// A stale owner leaves even the metadata alone.
		_, _ = o.cfg.Store.UpdateMeta(context.WithoutCancel(ctx), func(m *Meta) error {
			m.LastFlushAt = end
			if lastErr != nil {
				m.LastError = lastErr
			}
			return nil
		})
	}
	ev := Event{Kind: EventFlushEnd, At: end, Owner: lease.Owner, LeaseToken: lease.Token, Duration: end.Sub(start)}
	if err != nil {
		ev.Reason = short(err.Error())
	}
	o.emit(ev)
	return rep, err
}

func (f *flushRun) loop(ctx context.Context) error {
	o := f.o
	for {
		now := o.cfg.Clock.Now()
		if !now.Before(f.deadline) || ctx.Err() != nil {
			return nil
		}
		if _, err := o.cfg.Store.UpdateLease(ctx, o.lockName, RenewLease(f.lease, now, o.cfg.LeaseTTL)); err != nil {
			return err
		}
		meta, err := o.cfg.Store.UpdateMeta(ctx, func(*Meta) error { return nil })
		if err != nil {
			return err
		}
		if meta.Paused {
			return ErrPaused
		}
		recs, err := o.cfg.Store.Claim(ctx, ClaimRequest{
			Lease: f.lease, Now: now, Limit: o.cfg.BatchSize, LeaseTTL: o.cfg.LeaseTTL,
			UserID: f.session.UserID, TenantID: f.session.TenantID,
			MaxSchema: o.cfg.SchemaVersion, Paused: meta.AuthPaused,
		})
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		f.count(func(r *FlushReport) { r.Batches++; r.Claimed += len(recs) }, nil)
		for i := range recs {
			o.emit(Event{Kind: EventClaim, At: now, RecordID: recs[i].ID, OperationKeyHash: hashKey(recs[i].OperationKey),
				Owner: f.lease.Owner, LeaseToken: f.lease.Token, Attempt: recs[i].Attempts + 1})
		}
		f.runLanes(ctx, lanesOf(recs))
		if err := f.stopped(); err != nil {
			return err
		}
	}
}

// lanesOf splits a claimed batch (lanes are contiguous) into per-entity lanes.
func lanesOf(recs []Record) [][]Record {
	var lanes [][]Record
	for i := range recs {
		if i == 0 || recs[i].EntityKey() != recs[i-1].EntityKey() {
			lanes = append(lanes, nil)
		}
		lanes[len(lanes)-1] = append(lanes[len(lanes)-1], recs[i])
	}
	return lanes
}

// runLanes sends lanes with at most Concurrency at once; each lane is sent in
// order and stops at its first record that is not acked. Concurrency 1 runs
// inline without goroutines (deterministic, as the simulation needs).
func (f *flushRun) runLanes(ctx context.Context, lanes [][]Record) {
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

func (f *flushRun) runLane(ctx context.Context, lane []Record) {
	for i := range lane {
		if f.stopped() != nil || ctx.Err() != nil || !f.o.cfg.Clock.Now().Before(f.deadline) {
			f.release(ctx, lane[i:])
			return
		}
		acked, err := f.sendOne(ctx, lane[i])
		if err != nil {
			f.fail(err)
		}
		if !acked {
			f.release(ctx, lane[i+1:])
			return
		}
	}
}

// release hands claimed, unsent records back uncharged. A stale owner's
// release is refused by the store, and lease expiry recovers them instead.
func (f *flushRun) release(ctx context.Context, recs []Record) {
	if len(recs) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for i := range recs {
		now := f.o.cfg.Clock.Now()
		if _, err := f.o.cfg.Store.Update(ctx, f.lease, recs[i].ID, apply(func(r Record) (Record, error) {
			return Refund(r, f.lease, now, nil)
		})); err == nil {
			f.count(func(r *FlushReport) { r.Released++ }, nil)
		} else if errors.Is(err, ErrStaleOwner) {
			return
		}
	}
}

// apply adapts a pure transition to a Store update function.
func apply(t func(Record) (Record, error)) func(*Record) error {
	return func(r *Record) error {
		n, err := t(*r)
		if err != nil {
			return err
		}
		*r = n
		return nil
	}
}

// request builds the wire request for rec.
func (f *flushRun) request(rec *Record, body []byte) Request {
	h := Header{
		wire.HeaderIdempotencyKey: wire.FormatIdempotencyKey(rec.IdempotencyKey),
		wire.HeaderOperationID:    rec.ID,
	}
	if f.lease.Resource != "" {
		h[wire.HeaderResource] = f.lease.Resource
	}
	if f.lease.FenceToken != 0 {
		h[wire.HeaderFencingToken] = wire.FormatToken(f.lease.FenceToken)
	}
	ep := f.o.cfg.Endpoint
	if p, ok := f.o.cfg.Policies[rec.OperationType]; ok && p.Endpoint != "" {
		ep = p.Endpoint
	}
	return Request{Method: "POST", Endpoint: ep, Header: h, Body: body, RecordID: rec.ID, UserID: rec.UserID}
}
