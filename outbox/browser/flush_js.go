//go:build js && wasm

package browser

import (
	"context"
	"errors"
	"strconv"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

func (r *Runtime) flushLoop() {
	for {
		select {
		case <-r.ctx.Done():
			return
		case reason := <-r.kickCh:
			_, _, _ = r.attempt(r.ctx, reason, false)
		case <-r.stealCh:
			if _, _, err := r.attempt(r.ctx, "steal", true); err != nil {
				// Two tabs that steal at once can both come away without
				// the queue: the Web Lock goes to the later thief, the
				// lease to the slower one, which fences the other. Try
				// again at once, without stealing: whoever finds the lock
				// free flushes.
				r.Kick("steal")
			}
		case <-r.dueT.C:
			_, _, _ = r.attempt(r.ctx, "timer", false)
		}
	}
}

// attempt takes ownership (the Web Lock with ifAvailable, or with steal from
// a frozen owner; the IndexedDB lease without Web Locks) and flushes.
func (r *Runtime) attempt(ctx context.Context, reason string, steal bool) (rep outbox.FlushReport, skipped bool, err error) {
	// One attempt at a time in this runtime: a manual Flush waits for the
	// background one instead of finding its own lock taken.
	if err := r.lockAttempt(ctx); err != nil {
		return rep, false, err
	}
	defer r.unlockAttempt()
	if r.frozen.Load() {
		return rep, false, outbox.ErrPaused // resume kicks a flush
	}
	if r.ob.QueueSession().UserID == "" {
		return rep, false, outbox.ErrNoSession
	}
	r.mu.Lock()
	wait := time.Until(r.fenceRetryAt)
	paused := r.last.Paused
	r.mu.Unlock()
	if paused && !steal && reason != "manual" {
		// Paused (as last read, or set here): Resume in any tab announces
		// OUTBOX_CHANGED, which flushes. No lock, no fence request meanwhile.
		return rep, false, outbox.ErrPaused
	}
	if wait > 0 && !steal && reason != "manual" && reason != "online" {
		// The server could not be reached for a fencing token: wait
		// for the retry timer (or the online event) instead of hammering.
		return rep, false, ErrFenceUnavailable
	}
	run := func(lctx context.Context, webLock bool) error {
		rep, skipped, err = r.ownAndFlush(lctx, reason, webLock, steal)
		return nil
	}
	if !r.cfg.NoWebLocks {
		lerr := locks.Request(ctx, r.lockName, locks.Options{IfAvailable: !steal, Steal: steal}, func(lctx context.Context) error {
			return run(lctx, true)
		})
		switch {
		case errors.Is(lerr, locks.ErrNotAcquired):
			r.skip(reason)
			return rep, true, nil
		case errors.Is(lerr, locks.ErrUnavailable):
			// fall through to the IndexedDB lease
		case errors.Is(lerr, locks.ErrStolen):
			return rep, false, queue.ErrStaleOwner
		case lerr != nil:
			return rep, false, lerr
		default:
			return rep, skipped, err
		}
	}
	_ = run(ctx, false)
	return rep, skipped, err
}

// lockAttempt takes this runtime's one attempt slot (attemptSem), or gives
// up when ctx ends: a caller waiting behind a long attempt keeps its own
// deadline.
func (r *Runtime) lockAttempt(ctx context.Context) error {
	select {
	case r.attemptSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Runtime) unlockAttempt() { <-r.attemptSem }

func (r *Runtime) skip(reason string) {
	r.mu.Lock()
	r.contended = true
	r.mu.Unlock()
	if reason == reasonLeasePoll {
		return
	}
	r.ob.SkippedLocked(r.id, reason)
	r.markDirty(false)
}

func (r *Runtime) ownAndFlush(ctx context.Context, reason string, webLock, steal bool) (rep outbox.FlushReport, skipped bool, err error) {
	r.mu.Lock()
	r.busy = true
	if webLock {
		// Granted the Web Lock: from now on this runtime answers the
		// watchdog (see kindStatusAsk), also while it takes the lease
		// and the fence, so a live owner is not stolen from meanwhile.
		r.grantAt = time.Now()
	}
	victim := r.last.OwnerID
	if victim == "" {
		victim = r.remoteOwner
	}
	r.mu.Unlock()
	if steal {
		// Before any IndexedDB request: a frozen owner may hold a
		// transaction open that would block ours until it aborts it.
		r.post(kindStolen, js.ValueOf(victim))
	}
	defer func() {
		r.mu.Lock()
		r.busy, r.grantAt = false, time.Time{}
		r.mu.Unlock()
	}()
	lease, user, skipped, err := r.own(ctx, reason, webLock || steal)
	if skipped || err != nil {
		return rep, skipped, err
	}
	defer func() {
		r.mu.Lock()
		r.owning, r.flushing = false, false
		r.mu.Unlock()
		r.markDirty(true)
	}()
	rep, err = r.flushOwned(ctx, lease, webLock)
	r.afterFlush(ctx, lease, user, rep, err)
	return rep, false, err
}

// own takes the fallback lease (stealing it when steal) and the server
// fencing token for the queue's user, and announces the takeover. skipped:
// another tab holds the lease.
func (r *Runtime) own(ctx context.Context, reason string, steal bool) (lease queue.Lease, user string, skipped bool, err error) {
	lease, err = r.ob.Acquire(ctx, r.id, steal)
	if errors.Is(err, queue.ErrLeaseHeld) {
		r.skip(reason)
		return lease, "", true, nil
	}
	if err != nil {
		return lease, "", false, err
	}
	r.mu.Lock()
	r.contended = false
	r.mu.Unlock()
	// The queue's session as stored, not as last heard: the fence and the
	// flush are for its user (Flush checks it again before every claim).
	if _, err := r.ob.SyncSession(ctx); err != nil {
		_ = r.ob.Release(context.WithoutCancel(ctx), lease)
		return lease, "", false, err
	}
	user = r.ob.QueueSession().UserID
	res := queue.FenceResource(r.cfg.Name, r.cfg.Protocol, user)
	tok, ferr, err := r.fence(ctx, res, user)
	if err != nil {
		r.fenceFailed(ctx, lease, ferr, err)
		return lease, "", false, err
	}
	lease.Resource, lease.FenceToken = res, tok
	r.mu.Lock()
	failing := r.last.Failure.Failing()
	r.mu.Unlock()
	if failing {
		// The server answered: a failure spell the status shows is over
		// even if there is nothing to send (the flush below tells more).
		_ = r.ob.NoteReached(ctx)
	}
	r.mu.Lock()
	r.fenceFails, r.fenceRetryAt = 0, time.Time{}
	r.owning, r.flushing, r.lease, r.lastStep = true, true, lease, time.Now()
	r.mu.Unlock()
	// Announce the takeover: waiting tabs stop their status timers.
	r.post(kindStatusAnswer, r.answerPayload(lease, 0))
	r.markDirty(true)
	return lease, user, false, nil
}

// flushOwned flushes under lease until the queue has nothing claimable or
// no more work was hinted meanwhile, renewing the fallback lease when no
// Web Lock holds ownership.
func (r *Runtime) flushOwned(ctx context.Context, lease queue.Lease, webLock bool) (rep outbox.FlushReport, err error) {
	if !webLock {
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go r.renew(rctx, lease)
	}
	for {
		var one outbox.FlushReport
		one, err = r.ob.Flush(ctx, lease)
		rep.Batches += one.Batches
		rep.Claimed += one.Claimed
		rep.Acked += one.Acked
		rep.Retried += one.Retried
		rep.DeadLettered += one.DeadLettered
		rep.Terminal += one.Terminal
		rep.Conflicts += one.Conflicts
		rep.Released += one.Released
		rep.Requests += one.Requests
		rep.More = one.More
		if err != nil || ctx.Err() != nil || one.Claimed == 0 {
			return rep, err
		}
		if r.cfg.Passive && one.More {
			continue // a drain goes on until nothing due is left
		}
		// More work arrived while flushing (hints coalesced in kickCh)?
		select {
		case <-r.kickCh:
			continue
		default:
		}
		return rep, err
	}
}

// afterFlush releases the lease (unless ownership was lost) and arms what
// flushes next, by how the flush ended.
func (r *Runtime) afterFlush(ctx context.Context, lease queue.Lease, user string, rep outbox.FlushReport, err error) {
	stale := errors.Is(err, queue.ErrStaleOwner) || errors.Is(err, outbox.ErrStepDown) || ctx.Err() != nil
	if !stale {
		_ = r.ob.Release(context.WithoutCancel(ctx), lease)
	}
	if r.cfg.Passive {
		// No timers to arm: the next sync event drains again.
		if err == nil {
			r.compact(ctx)
		}
		return
	}
	switch {
	case errors.Is(err, outbox.ErrStepDown), errors.Is(err, outbox.ErrSessionChanged):
		// Ownership ended; the next flush re-acquires with a new token.
		r.dueT.Reset(100 * time.Millisecond)
	case stale, errors.Is(err, outbox.ErrPaused), errors.Is(err, outbox.ErrAuthRequired), errors.Is(err, outbox.ErrSessionMismatch):
		// Resume (in any tab) announces OUTBOX_CHANGED and flushes.
	case errors.Is(err, outbox.ErrOffline):
		// No timer: the online event (in every tab) flushes.
	case rep.More:
		// Stopped at the deadline with work left: go on at once (another
		// tab may take over meanwhile: the lock decides), without reading
		// every waiting record for a due time that is now.
		r.dueT.Reset(time.Millisecond)
		r.compact(ctx)
	default:
		r.scheduleNext(user)
		r.compact(ctx)
	}
}

// compact deletes old acked records, at most once a minute, as the owner.
func (r *Runtime) compact(ctx context.Context) {
	r.mu.Lock()
	due := time.Since(r.compactedAt) >= time.Minute
	if due {
		r.compactedAt = time.Now()
	}
	r.mu.Unlock()
	if due {
		if n, err := r.ob.Compact(context.WithoutCancel(ctx), r.cfg.AckedRetention); err == nil && n > 0 {
			r.markDirty(true)
		}
	}
}

// renew keeps the fallback lease alive during a long flush.
func (r *Runtime) renew(ctx context.Context, l queue.Lease) {
	every := r.ob.Config().LeaseTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := r.store.UpdateLease(ctx, r.ob.LockName(), queue.RenewLease(l, time.Now(), r.ob.Config().LeaseTTL)); err != nil {
				return
			}
		}
	}
}

// scheduleNext arms the timer for the next due record of user.
func (r *Runtime) scheduleNext(user string) {
	recs, err := r.store.List(r.ctx, outbox.Filter{UserID: user, Statuses: []queue.Status{queue.StatusPending, queue.StatusFailed}})
	if err != nil {
		return
	}
	next := nextDue(recs)
	if next.IsZero() {
		return
	}
	d := time.Until(next)
	if d < 0 {
		d = 0
	}
	r.dueT.Reset(d + time.Millisecond)
}

// fence obtains a server fencing token for resource (POST FencePath+resource).
// A failure comes with its ErrorInfo (FenceError).
func (r *Runtime) fence(ctx context.Context, resource, user string) (uint64, queue.ErrorInfo, error) {
	resp, err := r.transport.Send(ctx, outbox.Request{Method: "POST", Endpoint: r.cfg.FencePath + resource, Header: outbox.Header{}, UserID: user})
	if err != nil {
		return 0, outbox.FenceError(0, err, errors.Is(err, outbox.ErrOffline)), errors.Join(ErrFenceUnavailable, err)
	}
	if resp.Status != 200 {
		return 0, outbox.FenceError(resp.Status, nil, false), errors.Join(ErrFenceUnavailable, errors.New("outbox: fence answered "+strconv.Itoa(resp.Status)))
	}
	tok, ok := parseFenceToken(resp.Body)
	if !ok {
		return 0, outbox.FenceError(resp.Status, nil, false), errors.Join(ErrFenceUnavailable, errors.New("outbox: fence answer without a token"))
	}
	return tok, queue.ErrorInfo{}, nil
}

// fenceFailed gives the lease back after a failed fencing token request,
// arms the retry timer (backoff, at most 30 s) and records the failure in
// the queue's metadata for every tab's status (still holding the lock: only
// the would-be owner writes it).
func (r *Runtime) fenceFailed(ctx context.Context, lease queue.Lease, e queue.ErrorInfo, err error) {
	r.mu.Lock()
	r.fenceFails++
	d := r.ob.Config().Backoff.Ceiling(r.fenceFails)
	if d > 30*time.Second {
		d = 30 * time.Second
	}
	r.fenceRetryAt = time.Now().Add(d)
	next := r.fenceRetryAt
	r.mu.Unlock()
	wctx := context.WithoutCancel(ctx)
	_ = r.ob.Release(wctx, lease)
	if r.ob.NoteFenceFailure(wctx, e, next) == nil {
		r.markDirty(true)
	}
	r.dueT.Reset(d)
	r.ob.FenceFailed(r.id, lease.Token, err)
}
