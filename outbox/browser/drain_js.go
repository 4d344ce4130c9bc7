//go:build js && wasm

package browser

import (
	"context"
	"errors"
	"time"

	"github.com/tabfence/tabfence/internal/deadline"
	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// SyncTag is the Background Sync tag of the queue: its Web Lock name
// (tabfence:outbox-<name>:v<protocol>), so a worker finds the queue a tag
// is for and a page of another protocol registers another tag.
func (r *Runtime) SyncTag() string { return r.lockName }

// leasePoll is how often a drain without Web Locks tries the IndexedDB
// lease while a tab holds it.
const leasePoll = 250 * time.Millisecond

// reasonLeasePoll is the trigger of a drain's later lease polls: skip
// leaves them out of the events (the first poll's skip was reported).
const reasonLeasePoll = "sync-poll"

// Drain flushes the queue once, as a sync event asks: it waits for the
// flush lock until ctx ends (a tab that holds it is flushing; what it leaves
// is ours), takes the lease and the server fencing token as a tab does,
// flushes until nothing due is left, releases, and says what the event
// should do (DrainReport.Reason, Retry). The error is for a closed runtime
// only: ordinary outcomes are in the report.
func (r *Runtime) Drain(ctx context.Context, o DrainOptions) (DrainReport, error) {
	if r.closed.Load() {
		return DrainReport{}, ErrRuntimeClosed
	}
	// Close ends a waiting drain too (its lock request is aborted).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.ctx, cancel)()
	out := syncOutcome{LastChance: o.LastChance}
	var rep DrainReport
	// The queue's session as stored: pages log in and out while the
	// worker sleeps.
	if _, out.Err = r.ob.SyncSession(ctx); out.Err == nil {
		out.User = r.ob.QueueSession().UserID
		if out.User != "" {
			// An empty queue costs nothing: no lock, no lease, no fence.
			if n, err := r.unsettled(ctx, out.User); err == nil && n == 0 {
				return DrainReport{Reason: "done"}, nil
			}
			rep.FlushReport, out.Err = r.drainAttempt(ctx, out.User)
		}
	}
	if r.closed.Load() {
		return rep, ErrRuntimeClosed
	}
	// The verdict reads the queue even when ctx ended (a busy lock).
	rctx, cancel := deadline.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var serr error
	out.Status, out.Remaining, serr = r.drainState(rctx, out.User)
	if out.Err == nil {
		out.Err = serr
	}
	rep.Remaining = out.Remaining
	rep.Reason, rep.Retry = syncVerdict(out)
	r.markDirty(true)
	return rep, nil
}

// drainAttempt is drainOwned as this runtime's one attempt at a time; a
// drain waiting behind another gives up when its ctx ends ("busy").
func (r *Runtime) drainAttempt(ctx context.Context, user string) (outbox.FlushReport, error) {
	if err := r.lockAttempt(ctx); err != nil {
		return outbox.FlushReport{}, errors.Join(errLockBusy, err)
	}
	defer r.unlockAttempt()
	return r.drainOwned(ctx, user)
}

// drainOwned takes ownership for user, waiting for the Web Lock (the
// IndexedDB lease, polled, without Web Locks) until ctx ends, and flushes
// with the tabs' own code. A paused queue takes no lock and asks no fence.
func (r *Runtime) drainOwned(ctx context.Context, user string) (rep outbox.FlushReport, err error) {
	p, err := r.ob.Status(ctx)
	if err != nil {
		return rep, err
	}
	if (syncOutcome{User: user, Status: p}).held() {
		return rep, outbox.ErrPaused // the verdict tells paused from auth
	}
	var skipped bool
	reason := "sync"
	run := func(lctx context.Context, webLock bool) {
		rep, skipped, err = r.ownAndFlush(lctx, reason, webLock, false)
	}
	if !r.cfg.NoWebLocks {
		lerr := locks.Request(ctx, r.lockName, locks.Options{}, func(lctx context.Context) error {
			run(lctx, true)
			return nil
		})
		switch {
		case errors.Is(lerr, locks.ErrUnavailable):
			// fall through to the IndexedDB lease
		case errors.Is(lerr, locks.ErrStolen):
			return rep, queue.ErrStaleOwner
		case lerr != nil && ctx.Err() != nil:
			return rep, errors.Join(errLockBusy, lerr)
		case lerr != nil:
			return rep, lerr
		default:
			return rep, err
		}
	}
	for {
		run(ctx, false)
		if !skipped {
			return rep, err
		}
		reason = reasonLeasePoll // one skip event for the whole wait
		t := time.NewTimer(leasePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return rep, errors.Join(errLockBusy, ctx.Err())
		case <-t.C:
		}
	}
}

// drainState reads the projection and counts the unsettled records of
// user (of every user without a session) that this build sends: the ones
// of a payload schema it leaves alone wait for another build, and a retry
// here would send nothing.
func (r *Runtime) drainState(ctx context.Context, user string) (outbox.Projection, int, error) {
	p, err := r.ob.Status(ctx)
	if err != nil {
		return p, 0, err
	}
	n, err := r.unsettled(ctx, user)
	return p, n, err
}

// unsettled counts the unsettled records of user (of every user for "")
// that this build sends: one read of those records, not the projection.
func (r *Runtime) unsettled(ctx context.Context, user string) (int, error) {
	recs, err := r.store.List(ctx, outbox.Filter{UserID: user, Statuses: []queue.Status{
		queue.StatusPending, queue.StatusLeased, queue.StatusSending, queue.StatusFailed}})
	if err != nil {
		return 0, err
	}
	gate, n := r.ob.SchemaGate(), 0
	for i := range recs {
		if !gate.Unsupported(&recs[i]) {
			n++
		}
	}
	return n, nil
}
