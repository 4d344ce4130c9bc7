package browser

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

func TestSyncVerdict(t *testing.T) {
	paused := outbox.Projection{Meta: outbox.Meta{Paused: true}}
	authPaused := outbox.Projection{Meta: outbox.Meta{AuthPaused: []string{"bob", "alice"}}}
	otherAuth := outbox.Projection{Meta: outbox.Meta{AuthPaused: []string{"bob"}}}
	held := outbox.Projection{Meta: outbox.Meta{SessionHeld: "alice"}}
	for _, c := range []struct {
		name   string
		o      syncOutcome
		reason string
		retry  bool
	}{
		{"nothing left", syncOutcome{User: "alice"}, "done", false},
		{"records left", syncOutcome{User: "alice", Remaining: 2}, "more", true},
		{"records left, last chance", syncOutcome{User: "alice", Remaining: 2, LastChance: true}, "more", false},
		{"no session", syncOutcome{Remaining: 3}, "no-session", false},
		{"session gone mid-drain", syncOutcome{User: "alice", Err: outbox.ErrNoSession}, "no-session", false},
		{"paused", syncOutcome{User: "alice", Status: paused, Err: outbox.ErrPaused, Remaining: 1}, "paused", false},
		{"401", syncOutcome{User: "alice", Err: outbox.ErrAuthRequired, Remaining: 1}, "auth", false},
		{"auth paused before the drain", syncOutcome{User: "alice", Status: authPaused, Err: outbox.ErrPaused, Remaining: 1}, "auth", false},
		{"another user auth paused", syncOutcome{User: "alice", Status: otherAuth, Remaining: 1}, "more", true},
		{"session mismatch", syncOutcome{User: "alice", Err: outbox.ErrSessionMismatch}, "auth", false},
		{"session held", syncOutcome{User: "alice", Status: held, Remaining: 1}, "auth", false},
		{"offline", syncOutcome{User: "alice", Err: outbox.ErrOffline, Remaining: 1}, "offline", true},
		{"offline fence", syncOutcome{User: "alice", Err: errors.Join(ErrFenceUnavailable, outbox.ErrOffline), Remaining: 1}, "offline", true},
		{"fence 503", syncOutcome{User: "alice", Err: ErrFenceUnavailable, Remaining: 1}, "fence", true},
		{"fence, last chance", syncOutcome{User: "alice", Err: ErrFenceUnavailable, LastChance: true}, "fence", false},
		{"lock busy", syncOutcome{User: "alice", Err: errors.Join(errLockBusy, context.DeadlineExceeded), Remaining: 1}, "busy", true},
		{"stolen", syncOutcome{User: "alice", Err: locks.ErrStolen}, "stale", true},
		{"stale owner", syncOutcome{User: "alice", Err: queue.ErrStaleOwner}, "stale", true},
		{"step down", syncOutcome{User: "alice", Err: &outbox.StepDownError{Token: 1, Highest: 2}}, "stale", true},
		{"session changed", syncOutcome{User: "alice", Err: outbox.ErrSessionChanged}, "stale", true},
		{"deadline mid-flush", syncOutcome{User: "alice", Err: context.DeadlineExceeded, Remaining: 4}, "more", true},
		{"deadline, all sent", syncOutcome{User: "alice", Err: context.DeadlineExceeded}, "done", false},
		{"store error", syncOutcome{User: "alice", Err: outbox.ErrStoreClosed}, "error", true},
		{"store error, last chance", syncOutcome{User: "alice", Err: outbox.ErrStoreClosed, LastChance: true}, "error", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			reason, retry := syncVerdict(c.o)
			require.Equal(t, c.reason, reason)
			require.Equal(t, c.retry, retry)
			require.Contains(t, SyncReasons, reason)
		})
	}
}
