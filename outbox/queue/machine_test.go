package queue_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox"
)

func pending() outbox.Record {
	return outbox.Record{ID: "r1", IdempotencyKey: "k1", UserID: "u", Status: outbox.StatusPending, MaxAttempts: 3, NextAttemptAt: t0}
}

var la = outbox.Lease{Name: "q", Owner: "A", Token: 7}

func TestTransitionsHappyPath(t *testing.T) {
	r, err := outbox.Claim(pending(), la, t0, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, outbox.StatusLeased, r.Status)
	require.Equal(t, t0.Add(30*time.Second), r.LeaseExpiresAt)
	r, err = outbox.MarkSending(r, la, t0)
	require.NoError(t, err)
	require.Equal(t, 1, r.Attempts)
	r, err = outbox.Ack(r, la, t0, outbox.StoredResponse{Status: 201, Body: []byte("x")})
	require.NoError(t, err)
	require.Equal(t, outbox.StatusAcked, r.Status)
	require.Equal(t, 201, r.Response.Status)
	_, err = outbox.Retry(r, la, t0, t0, outbox.ErrorInfo{})
	require.ErrorIs(t, err, outbox.ErrInvalidTransition)
}

func TestStaleLeaseTokenRejected(t *testing.T) {
	r, _ := outbox.Claim(pending(), la, t0, time.Minute)
	stale := outbox.Lease{Name: "q", Owner: "A", Token: 6}
	other := outbox.Lease{Name: "q", Owner: "B", Token: 7}
	for _, l := range []outbox.Lease{stale, other} {
		_, err := outbox.MarkSending(r, l, t0)
		require.ErrorIs(t, err, outbox.ErrStaleOwner)
		_, err = outbox.Refund(r, l, t0, nil)
		require.ErrorIs(t, err, outbox.ErrStaleOwner)
	}
	s, _ := outbox.MarkSending(r, la, t0)
	for _, l := range []outbox.Lease{stale, other} {
		_, err := outbox.Ack(s, l, t0, outbox.StoredResponse{})
		require.ErrorIs(t, err, outbox.ErrStaleOwner)
		_, err = outbox.Retry(s, l, t0, t0, outbox.ErrorInfo{})
		require.ErrorIs(t, err, outbox.ErrStaleOwner)
		_, err = outbox.Terminal(s, l, t0, outbox.ErrorInfo{})
		require.ErrorIs(t, err, outbox.ErrStaleOwner)
		_, err = outbox.MarkConflict(s, l, t0, outbox.ErrorInfo{})
		require.ErrorIs(t, err, outbox.ErrStaleOwner)
	}
}

func TestNotDueCannotBeClaimed(t *testing.T) {
	r := pending()
	r.NextAttemptAt = t0.Add(time.Second)
	_, err := outbox.Claim(r, la, t0, time.Minute)
	require.ErrorIs(t, err, outbox.ErrInvalidTransition)
}

func TestRetryThenDeadLetter(t *testing.T) {
	r := pending()
	for i := 1; i <= 3; i++ {
		r, _ = outbox.Claim(r, la, r.NextAttemptAt, time.Minute)
		r, _ = outbox.MarkSending(r, la, t0)
		var err error
		r, err = outbox.Retry(r, la, t0, t0.Add(time.Duration(i)*time.Second), outbox.ErrorInfo{Code: "http_503"})
		require.NoError(t, err)
	}
	require.Equal(t, outbox.StatusDeadLetter, r.Status)
	require.Equal(t, "http_503", r.LastError.Code)
	_, err := outbox.Claim(r, la, t0.Add(time.Hour), time.Minute)
	require.ErrorIs(t, err, outbox.ErrInvalidTransition)
	r, err = outbox.AppRetry(r, t0)
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, r.Status)
	require.Equal(t, 0, r.Attempts)
	require.Equal(t, "k1", r.IdempotencyKey)
}

func TestLeaseExpiryRecovery(t *testing.T) {
	r, _ := outbox.Claim(pending(), la, t0, 10*time.Second)
	_, err := outbox.RecoverExpired(r, t0.Add(9*time.Second))
	require.ErrorIs(t, err, outbox.ErrInvalidTransition)
	back, err := outbox.RecoverExpired(r, t0.Add(10*time.Second))
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, back.Status) // leased, never sent: nothing charged
	s, _ := outbox.MarkSending(r, la, t0)
	back, err = outbox.RecoverExpired(s, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, outbox.StatusFailed, back.Status)
	require.Equal(t, 1, back.Attempts)
	require.Equal(t, "lease_expired", back.LastError.Code)
	// the dead owner's late answer changes nothing once the record moved on
	_, err = outbox.Ack(back, la, t0, outbox.StoredResponse{})
	require.True(t, errors.Is(err, outbox.ErrInvalidTransition) || errors.Is(err, outbox.ErrStaleOwner))
}

func TestRefundDoesNotCharge(t *testing.T) {
	r, _ := outbox.Claim(pending(), la, t0, time.Minute)
	r, _ = outbox.MarkSending(r, la, t0)
	r, err := outbox.Refund(r, la, t0, &outbox.ErrorInfo{Code: "http_401"})
	require.NoError(t, err)
	require.Equal(t, 0, r.Attempts)
	require.Equal(t, 1, r.Sends)
	require.Equal(t, outbox.StatusPending, r.Status)
}

// Unsend undoes a charge made one ahead and never sent: attempts and sends
// as before, waiting again (failed if earlier attempts counted), unleased.
// A leased record is released as by Refund; another owner's is refused.
func TestUnsendUndoesTheCharge(t *testing.T) {
	r, _ := outbox.Claim(pending(), la, t0, time.Minute)
	r, _ = outbox.MarkSending(r, la, t0)
	u, err := outbox.Unsend(r, la, t0)
	require.NoError(t, err)
	require.Equal(t, 0, u.Attempts)
	require.Equal(t, 0, u.Sends)
	require.Equal(t, outbox.StatusPending, u.Status)

	f := pending()
	f.Status, f.Attempts, f.Sends = outbox.StatusFailed, 2, 2
	f, _ = outbox.Claim(f, la, t0, time.Minute)
	f, _ = outbox.MarkSending(f, la, t0)
	f, err = outbox.Unsend(f, la, t0)
	require.NoError(t, err)
	require.Equal(t, 2, f.Attempts)
	require.Equal(t, 2, f.Sends)
	require.Equal(t, outbox.StatusFailed, f.Status)

	l, _ := outbox.Claim(pending(), la, t0, time.Minute)
	l, err = outbox.Unsend(l, la, t0)
	require.NoError(t, err)
	require.Equal(t, outbox.StatusPending, l.Status)
	require.Equal(t, 0, l.Sends)

	_, err = outbox.Unsend(r, outbox.Lease{Owner: "other", Token: 99}, t0)
	require.True(t, errors.Is(err, outbox.ErrStaleOwner))
}

func TestAppRetryRefusesInFlight(t *testing.T) {
	r, _ := outbox.Claim(pending(), la, t0, time.Minute)
	_, err := outbox.AppRetry(r, t0)
	require.ErrorIs(t, err, outbox.ErrInvalidTransition)
}

func TestLeaseFns(t *testing.T) {
	l, err := outbox.AcquireLease("A", t0, 10*time.Second, false)(outbox.Lease{}, false)
	require.NoError(t, err)
	require.Equal(t, uint64(1), l.Token)
	_, err = outbox.AcquireLease("B", t0.Add(time.Second), 10*time.Second, false)(l, true)
	require.ErrorIs(t, err, outbox.ErrLeaseHeld)
	b, err := outbox.AcquireLease("B", t0.Add(10*time.Second), 10*time.Second, false)(l, true)
	require.NoError(t, err)
	require.Equal(t, uint64(2), b.Token)
	_, err = outbox.RenewLease(l, t0, time.Second)(b, true)
	require.ErrorIs(t, err, outbox.ErrStaleOwner)
	c, err := outbox.AcquireLease("C", t0, time.Second, true)(b, true)
	require.NoError(t, err)
	require.Equal(t, uint64(3), c.Token)
}
