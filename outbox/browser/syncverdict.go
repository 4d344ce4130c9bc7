package browser

import (
	"context"
	"errors"
	"slices"

	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// Errors of the Runtime.
var (
	// ErrFenceUnavailable: the server fencing token could not be obtained
	// (offline, server down): nothing was sent, nothing was charged.
	ErrFenceUnavailable = errors.New("outbox: fencing token unavailable")
	// ErrRuntimeClosed: Close was called.
	ErrRuntimeClosed = errors.New("outbox: runtime closed")
	// errLockBusy: Drain waited for the flush lock until its context ended.
	errLockBusy = errors.New("outbox: flush lock held until the drain's deadline")
)

// DrainOptions tunes one Drain.
type DrainOptions struct {
	// LastChance: the browser will not retry this sync (its last attempt):
	// the report never asks for a retry, and the records stay queued.
	LastChance bool
}

// DrainReport is what one Drain did and what the sync event should do.
type DrainReport struct {
	outbox.FlushReport
	// Remaining is the number of unsettled records (pending, sending,
	// failed) of the queue's user after the drain that this build sends
	// (not those of a payload schema it leaves alone); of every user when
	// there is no session.
	Remaining int
	// Retry: the sync event should fail so the browser retries later.
	Retry bool
	// Reason is one word: see SyncReasons.
	Reason string
}

// SyncReasons are the words of DrainReport.Reason, in the order the verdict
// tries them: "done" (nothing left to send for the queue's user), "more"
// (unsettled records remain), "offline", "fence" (no fencing token), "busy"
// (the flush lock stayed held until the drain's deadline), "stale"
// (ownership was taken over mid-drain), "auth" (the receiver wants a new
// login), "paused", "no-session", "error".
var SyncReasons = []string{"done", "more", "offline", "fence", "busy", "stale", "auth", "paused", "no-session", "error"}

// syncOutcome is what a drain observed: the verdict's input.
type syncOutcome struct {
	User       string            // the queue's user the drain flushed for ("" = no session)
	Err        error             // of taking the lock, the lease, the fence or the flush
	Status     outbox.Projection // read after the drain (Meta: pause, auth pause, held session)
	Remaining  int               // unsettled records of User
	LastChance bool
}

// syncVerdict is the reason and the retry advice of a drain. A retry is
// asked when a later attempt can send something a page would not send
// anyway: a page's login or resume flushes by itself, so auth, paused and
// no-session do not retry; nothing retries on the last chance.
func syncVerdict(o syncOutcome) (reason string, retry bool) {
	reason = syncReason(o)
	switch reason {
	case "more", "offline", "fence", "busy", "stale", "error":
		retry = !o.LastChance
	}
	return reason, retry
}

// authHeld: User's records wait for a new login (a 401 paused them, or the
// receiver authenticated another user).
func (o syncOutcome) authHeld() bool {
	m := o.Status.Meta
	return o.User != "" && (slices.Contains(m.AuthPaused, o.User) || m.SessionHeld == o.User)
}

// held: nothing can be sent for User until a page acts (resume, login).
func (o syncOutcome) held() bool { return o.Status.Paused || o.authHeld() }

func syncReason(o syncOutcome) string {
	err, m := o.Err, o.Status.Meta
	authHeld := o.authHeld()
	switch {
	case o.User == "" || errors.Is(err, outbox.ErrNoSession):
		return "no-session"
	case errors.Is(err, outbox.ErrAuthRequired), errors.Is(err, outbox.ErrSessionMismatch), authHeld:
		return "auth"
	case m.Paused || errors.Is(err, outbox.ErrPaused):
		return "paused"
	case errors.Is(err, outbox.ErrOffline):
		return "offline"
	case errors.Is(err, ErrFenceUnavailable):
		return "fence"
	case errors.Is(err, errLockBusy):
		return "busy"
	case errors.Is(err, queue.ErrStaleOwner), errors.Is(err, outbox.ErrStepDown),
		errors.Is(err, locks.ErrStolen), errors.Is(err, outbox.ErrSessionChanged):
		return "stale"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The drain's deadline ended its flush: what is left is for later.
		if o.Remaining > 0 {
			return "more"
		}
		return "done"
	case err != nil:
		return "error"
	case o.Remaining > 0:
		return "more"
	}
	return "done"
}
