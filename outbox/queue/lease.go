package queue

import "time"

// The lease rules: the fns a Store runs on the lease row
// (outbox.Store.UpdateLease), so that one flush owner at a time changes
// records, and a superseded one changes nothing.

// AcquireLease returns the UpdateLease fn that takes the lease for owner
// until now+ttl with a higher token. Without steal it fails with ErrLeaseHeld
// while another owner's lease is unexpired (the IndexedDB fallback); with
// steal it always takes over (the caller holds the Web Lock, or is stealing
// it from a frozen owner). The token grows on every acquisition, so the old
// owner's changes are rejected from then on.
func AcquireLease(owner string, now time.Time, ttl time.Duration, steal bool) func(Lease, bool) (Lease, error) {
	return func(cur Lease, found bool) (Lease, error) {
		if found && !steal && cur.Owner != owner && now.Before(cur.ExpiresAt) {
			return cur, ErrLeaseHeld
		}
		tok := cur.Token + 1
		return Lease{Name: cur.Name, Owner: owner, Token: tok, ExpiresAt: now.Add(ttl), UpdatedAt: now}, nil
	}
}

// RenewLease returns the fn that extends l if it is still the current lease.
func RenewLease(l Lease, now time.Time, ttl time.Duration) func(Lease, bool) (Lease, error) {
	return func(cur Lease, found bool) (Lease, error) {
		if !found || cur.Owner != l.Owner || cur.Token != l.Token {
			return cur, ErrStaleOwner
		}
		cur.ExpiresAt, cur.UpdatedAt = now.Add(ttl), now
		return cur, nil
	}
}

// ReleaseLease returns the fn that expires l at once if it is still current,
// so a fallback contender need not wait for the TTL. The token is kept.
func ReleaseLease(l Lease, now time.Time) func(Lease, bool) (Lease, error) {
	return func(cur Lease, found bool) (Lease, error) {
		if !found || cur.Owner != l.Owner || cur.Token != l.Token {
			return cur, ErrStaleOwner
		}
		cur.ExpiresAt, cur.UpdatedAt = now, now
		return cur, nil
	}
}

// CurrentLease reports whether l is the lease row cur (owner and token).
func CurrentLease(cur Lease, found bool, l Lease) bool {
	return found && cur.Owner == l.Owner && cur.Token == l.Token
}
