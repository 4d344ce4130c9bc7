package outbox

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func pending() Record {
	return Record{ID: "r1", IdempotencyKey: "k1", UserID: "u", Status: StatusPending, MaxAttempts: 3, NextAttemptAt: t0}
}

var la = Lease{Name: "q", Owner: "A", Token: 7}

func TestTransitionsHappyPath(t *testing.T) {
	r, err := Claim(pending(), la, t0, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, StatusLeased, r.Status)
	require.Equal(t, t0.Add(30*time.Second), r.LeaseExpiresAt)
	r, err = MarkSending(r, la, t0)
	require.NoError(t, err)
	require.Equal(t, 1, r.Attempts)
	r, err = Ack(r, la, t0, StoredResponse{Status: 201, Body: []byte("x")})
	require.NoError(t, err)
	require.Equal(t, StatusAcked, r.Status)
	require.Equal(t, 201, r.Response.Status)
	_, err = Retry(r, la, t0, t0, ErrorInfo{})
	require.ErrorIs(t, err, ErrInvalidTransition)
}

func TestStaleLeaseTokenRejected(t *testing.T) {
	r, _ := Claim(pending(), la, t0, time.Minute)
	stale := Lease{Name: "q", Owner: "A", Token: 6}
	other := Lease{Name: "q", Owner: "B", Token: 7}
	for _, l := range []Lease{stale, other} {
		_, err := MarkSending(r, l, t0)
		require.ErrorIs(t, err, ErrStaleOwner)
		_, err = Refund(r, l, t0, nil)
		require.ErrorIs(t, err, ErrStaleOwner)
	}
	s, _ := MarkSending(r, la, t0)
	for _, l := range []Lease{stale, other} {
		_, err := Ack(s, l, t0, StoredResponse{})
		require.ErrorIs(t, err, ErrStaleOwner)
		_, err = Retry(s, l, t0, t0, ErrorInfo{})
		require.ErrorIs(t, err, ErrStaleOwner)
		_, err = Terminal(s, l, t0, ErrorInfo{})
		require.ErrorIs(t, err, ErrStaleOwner)
		_, err = MarkConflict(s, l, t0, ErrorInfo{})
		require.ErrorIs(t, err, ErrStaleOwner)
	}
}

func TestNotDueCannotBeClaimed(t *testing.T) {
	r := pending()
	r.NextAttemptAt = t0.Add(time.Second)
	_, err := Claim(r, la, t0, time.Minute)
	require.ErrorIs(t, err, ErrInvalidTransition)
}

func TestRetryThenDeadLetter(t *testing.T) {
	r := pending()
	for i := 1; i <= 3; i++ {
		r, _ = Claim(r, la, r.NextAttemptAt, time.Minute)
		r, _ = MarkSending(r, la, t0)
		var err error
		r, err = Retry(r, la, t0, t0.Add(time.Duration(i)*time.Second), ErrorInfo{Code: "http_503"})
		require.NoError(t, err)
	}
	require.Equal(t, StatusDeadLetter, r.Status)
	require.Equal(t, "http_503", r.LastError.Code)
	_, err := Claim(r, la, t0.Add(time.Hour), time.Minute)
	require.ErrorIs(t, err, ErrInvalidTransition)
	r, err = AppRetry(r, t0)
	require.NoError(t, err)
	require.Equal(t, StatusPending, r.Status)
	require.Equal(t, 0, r.Attempts)
	require.Equal(t, "k1", r.IdempotencyKey)
}

func TestLeaseExpiryRecovery(t *testing.T) {
	r, _ := Claim(pending(), la, t0, 10*time.Second)
	_, err := RecoverExpired(r, t0.Add(9*time.Second))
	require.ErrorIs(t, err, ErrInvalidTransition)
	back, err := RecoverExpired(r, t0.Add(10*time.Second))
	require.NoError(t, err)
	require.Equal(t, StatusPending, back.Status) // leased, never sent: nothing charged
	s, _ := MarkSending(r, la, t0)
	back, err = RecoverExpired(s, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, StatusFailed, back.Status)
	require.Equal(t, 1, back.Attempts)
	require.Equal(t, "lease_expired", back.LastError.Code)
	// the dead owner's late answer changes nothing once the record moved on
	_, err = Ack(back, la, t0, StoredResponse{})
	require.True(t, errors.Is(err, ErrInvalidTransition) || errors.Is(err, ErrStaleOwner))
}

func TestRefundDoesNotCharge(t *testing.T) {
	r, _ := Claim(pending(), la, t0, time.Minute)
	r, _ = MarkSending(r, la, t0)
	r, err := Refund(r, la, t0, &ErrorInfo{Code: "http_401"})
	require.NoError(t, err)
	require.Equal(t, 0, r.Attempts)
	require.Equal(t, 1, r.Sends)
	require.Equal(t, StatusPending, r.Status)
}

// Unsend undoes a charge made one ahead and never sent: attempts and sends
// as before, waiting again (failed if earlier attempts counted), unleased.
// A leased record is released as by Refund; another owner's is refused.
func TestUnsendUndoesTheCharge(t *testing.T) {
	r, _ := Claim(pending(), la, t0, time.Minute)
	r, _ = MarkSending(r, la, t0)
	u, err := Unsend(r, la, t0)
	require.NoError(t, err)
	require.Equal(t, 0, u.Attempts)
	require.Equal(t, 0, u.Sends)
	require.Equal(t, StatusPending, u.Status)

	f := pending()
	f.Status, f.Attempts, f.Sends = StatusFailed, 2, 2
	f, _ = Claim(f, la, t0, time.Minute)
	f, _ = MarkSending(f, la, t0)
	f, err = Unsend(f, la, t0)
	require.NoError(t, err)
	require.Equal(t, 2, f.Attempts)
	require.Equal(t, 2, f.Sends)
	require.Equal(t, StatusFailed, f.Status)

	l, _ := Claim(pending(), la, t0, time.Minute)
	l, err = Unsend(l, la, t0)
	require.NoError(t, err)
	require.Equal(t, StatusPending, l.Status)
	require.Equal(t, 0, l.Sends)

	_, err = Unsend(r, Lease{Owner: "other", Token: 99}, t0)
	require.True(t, errors.Is(err, ErrStaleOwner))
}

func TestAppRetryRefusesInFlight(t *testing.T) {
	r, _ := Claim(pending(), la, t0, time.Minute)
	_, err := AppRetry(r, t0)
	require.ErrorIs(t, err, ErrInvalidTransition)
}

func TestLeaseFns(t *testing.T) {
	l, err := AcquireLease("A", t0, 10*time.Second, false)(Lease{}, false)
	require.NoError(t, err)
	require.Equal(t, uint64(1), l.Token)
	_, err = AcquireLease("B", t0.Add(time.Second), 10*time.Second, false)(l, true)
	require.ErrorIs(t, err, ErrLeaseHeld)
	b, err := AcquireLease("B", t0.Add(10*time.Second), 10*time.Second, false)(l, true)
	require.NoError(t, err)
	require.Equal(t, uint64(2), b.Token)
	_, err = RenewLease(l, t0, time.Second)(b, true)
	require.ErrorIs(t, err, ErrStaleOwner)
	c, err := AcquireLease("C", t0, time.Second, true)(b, true)
	require.NoError(t, err)
	require.Equal(t, uint64(3), c.Token)
}
