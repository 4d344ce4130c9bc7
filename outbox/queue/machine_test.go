package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox/queue"
)

func pending() queue.Record {
	return queue.Record{ID: "r1", IdempotencyKey: "k1", UserID: "u", Status: queue.StatusPending, MaxAttempts: 3, NextAttemptAt: t0}
}

var la = queue.Lease{Name: "q", Owner: "A", Token: 7}

func TestTransitionsHappyPath(t *testing.T) {
	r, err := queue.Claim(pending(), la, t0, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, queue.StatusLeased, r.Status)
	require.Equal(t, t0.Add(30*time.Second), r.LeaseExpiresAt)
	r, err = queue.MarkSending(r, la, t0)
	require.NoError(t, err)
	require.Equal(t, 1, r.Attempts)
	r, err = queue.Ack(r, la, t0, queue.StoredResponse{Status: 201, Body: []byte("x")})
	require.NoError(t, err)
	require.Equal(t, queue.StatusAcked, r.Status)
	require.Equal(t, 201, r.Response.Status)
	_, err = queue.Retry(r, la, t0, t0, queue.ErrorInfo{})
	require.ErrorIs(t, err, queue.ErrInvalidTransition)
}

func TestStaleLeaseTokenRejected(t *testing.T) {
	r, _ := queue.Claim(pending(), la, t0, time.Minute)
	stale := queue.Lease{Name: "q", Owner: "A", Token: 6}
	other := queue.Lease{Name: "q", Owner: "B", Token: 7}
	for _, l := range []queue.Lease{stale, other} {
		_, err := queue.MarkSending(r, l, t0)
		require.ErrorIs(t, err, queue.ErrStaleOwner)
		_, err = queue.Refund(r, l, t0, nil)
		require.ErrorIs(t, err, queue.ErrStaleOwner)
	}
	s, _ := queue.MarkSending(r, la, t0)
	for _, l := range []queue.Lease{stale, other} {
		_, err := queue.Ack(s, l, t0, queue.StoredResponse{})
		require.ErrorIs(t, err, queue.ErrStaleOwner)
		_, err = queue.Retry(s, l, t0, t0, queue.ErrorInfo{})
		require.ErrorIs(t, err, queue.ErrStaleOwner)
		_, err = queue.Terminal(s, l, t0, queue.ErrorInfo{})
		require.ErrorIs(t, err, queue.ErrStaleOwner)
		_, err = queue.MarkConflict(s, l, t0, queue.ErrorInfo{})
		require.ErrorIs(t, err, queue.ErrStaleOwner)
	}
}

func TestNotDueCannotBeClaimed(t *testing.T) {
	r := pending()
	r.NextAttemptAt = t0.Add(time.Second)
	_, err := queue.Claim(r, la, t0, time.Minute)
	require.ErrorIs(t, err, queue.ErrInvalidTransition)
}

func TestRetryThenDeadLetter(t *testing.T) {
	r := pending()
	for i := 1; i <= 3; i++ {
		r, _ = queue.Claim(r, la, r.NextAttemptAt, time.Minute)
		r, _ = queue.MarkSending(r, la, t0)
		var err error
		r, err = queue.Retry(r, la, t0, t0.Add(time.Duration(i)*time.Second), queue.ErrorInfo{Code: "http_503"})
		require.NoError(t, err)
	}
	require.Equal(t, queue.StatusDeadLetter, r.Status)
	require.Equal(t, "http_503", r.LastError.Code)
	_, err := queue.Claim(r, la, t0.Add(time.Hour), time.Minute)
	require.ErrorIs(t, err, queue.ErrInvalidTransition)
	r, err = queue.AppRetry(r, t0)
	require.NoError(t, err)
	require.Equal(t, queue.StatusPending, r.Status)
	require.Equal(t, 0, r.Attempts)
	require.Equal(t, "k1", r.IdempotencyKey)
}

func TestLeaseExpiryRecovery(t *testing.T) {
	r, _ := queue.Claim(pending(), la, t0, 10*time.Second)
	_, err := queue.RecoverExpired(r, t0.Add(9*time.Second))
	require.ErrorIs(t, err, queue.ErrInvalidTransition)
	back, err := queue.RecoverExpired(r, t0.Add(10*time.Second))
	require.NoError(t, err)
	require.Equal(t, queue.StatusPending, back.Status) // leased, never sent: nothing charged
	s, _ := queue.MarkSending(r, la, t0)
	back, err = queue.RecoverExpired(s, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, queue.StatusFailed, back.Status)
	require.Equal(t, 1, back.Attempts)
	require.Equal(t, "lease_expired", back.LastError.Code)
	// the dead owner's late answer changes nothing once the record moved on
	_, err = queue.Ack(back, la, t0, queue.StoredResponse{})
	require.True(t, errors.Is(err, queue.ErrInvalidTransition) || errors.Is(err, queue.ErrStaleOwner))
}

func TestRefundDoesNotCharge(t *testing.T) {
	r, _ := queue.Claim(pending(), la, t0, time.Minute)
	r, _ = queue.MarkSending(r, la, t0)
	r, err := queue.Refund(r, la, t0, &queue.ErrorInfo{Code: "http_401"})
	require.NoError(t, err)
	require.Equal(t, 0, r.Attempts)
	require.Equal(t, 1, r.Sends)
	require.Equal(t, queue.StatusPending, r.Status)
}

// Unsend undoes a charge made one ahead and never sent: attempts and sends
// as before, waiting again (failed if earlier attempts counted), unleased.
// A leased record is released as by Refund; another owner's is refused.
func TestUnsendUndoesTheCharge(t *testing.T) {
	r, _ := queue.Claim(pending(), la, t0, time.Minute)
	r, _ = queue.MarkSending(r, la, t0)
	u, err := queue.Unsend(r, la, t0)
	require.NoError(t, err)
	require.Equal(t, 0, u.Attempts)
	require.Equal(t, 0, u.Sends)
	require.Equal(t, queue.StatusPending, u.Status)

	f := pending()
	f.Status, f.Attempts, f.Sends = queue.StatusFailed, 2, 2
	f, _ = queue.Claim(f, la, t0, time.Minute)
	f, _ = queue.MarkSending(f, la, t0)
	f, err = queue.Unsend(f, la, t0)
	require.NoError(t, err)
	require.Equal(t, 2, f.Attempts)
	require.Equal(t, 2, f.Sends)
	require.Equal(t, queue.StatusFailed, f.Status)

	l, _ := queue.Claim(pending(), la, t0, time.Minute)
	l, err = queue.Unsend(l, la, t0)
	require.NoError(t, err)
	require.Equal(t, queue.StatusPending, l.Status)
	require.Equal(t, 0, l.Sends)

	_, err = queue.Unsend(r, queue.Lease{Owner: "other", Token: 99}, t0)
	require.True(t, errors.Is(err, queue.ErrStaleOwner))
}

func TestAppRetryRefusesInFlight(t *testing.T) {
	r, _ := queue.Claim(pending(), la, t0, time.Minute)
	_, err := queue.AppRetry(r, t0)
	require.ErrorIs(t, err, queue.ErrInvalidTransition)
}

func TestLeaseFns(t *testing.T) {
	l, err := queue.AcquireLease("A", t0, 10*time.Second, false)(queue.Lease{}, false)
	require.NoError(t, err)
	require.Equal(t, uint64(1), l.Token)
	_, err = queue.AcquireLease("B", t0.Add(time.Second), 10*time.Second, false)(l, true)
	require.ErrorIs(t, err, queue.ErrLeaseHeld)
	b, err := queue.AcquireLease("B", t0.Add(10*time.Second), 10*time.Second, false)(l, true)
	require.NoError(t, err)
	require.Equal(t, uint64(2), b.Token)
	_, err = queue.RenewLease(l, t0, time.Second)(b, true)
	require.ErrorIs(t, err, queue.ErrStaleOwner)
	c, err := queue.AcquireLease("C", t0, time.Second, true)(b, true)
	require.NoError(t, err)
	require.Equal(t, uint64(3), c.Token)
}
