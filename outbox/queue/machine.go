package queue

import "time"

// The transitions below are pure: they take a record, inputs and now, and
// return the new record or a typed error, so a Store can run them inside one
// transaction with nothing but Go between its requests. Transitions made by a
// flush owner take its Lease and refuse (ErrStaleOwner) a record that is not
// leased to exactly that owner and token.

// HeldBy reports whether the record is in flight under lease l: what a
// Store checks before it applies an update made under a lease.
func (r *Record) HeldBy(l Lease) bool {
	return r.Status.InFlight() && r.LeaseOwner == l.Owner && r.LeaseToken == l.Token
}

func checkHolder(op string, r *Record, l Lease) error {
	if !r.Status.InFlight() {
		return TransitionError(op, r.Status)
	}
	if r.LeaseOwner != l.Owner || r.LeaseToken != l.Token {
		return &opError{op: op, detail: "record leased to another owner or token", err: ErrStaleOwner}
	}
	return nil
}

// waitingStatus is where a record goes back to when an attempt did not count.
func waitingStatus(r *Record) Status {
	if r.Attempts == 0 {
		return StatusPending
	}
	return StatusFailed
}

func clearLease(r *Record) {
	r.LeaseExpiresAt = time.Time{}
}

// Due reports whether a waiting record may be claimed at now.
func Due(r *Record, now time.Time) bool {
	return r.Status.Waiting() && !r.NextAttemptAt.After(now)
}

// Claim leases a due waiting record to l until now+ttl.
func Claim(r Record, l Lease, now time.Time, ttl time.Duration) (Record, error) {
	if !r.Status.Waiting() {
		return r, TransitionError("claim", r.Status)
	}
	if r.NextAttemptAt.After(now) {
		return r, &opError{op: "claim", detail: "not due", err: ErrInvalidTransition}
	}
	r.Status = StatusLeased
	r.LeaseOwner, r.LeaseToken, r.LeaseExpiresAt = l.Owner, l.Token, now.Add(ttl)
	r.UpdatedAt = now
	return r, nil
}

// Charge takes a waiting record the claim planned and charges its attempt,
// in one transition (waiting -> sending under l): Claim then MarkSending.
// The flush writes it with outbox.RecordUpdate.Take just before the record is
// handed to the transport; outbox.Store.Claim itself writes nothing for the
// records it plans, which saves a write per record. A failed record that is
// due because the network came back (networkRetryDue with reconnected) is
// due now, as PlanClaim decided. A record that is not waiting and due (in
// flight under another lease, settled, backing off) is refused.
func Charge(r Record, l Lease, now time.Time, ttl time.Duration, reconnected time.Time) (Record, error) {
	if networkRetryDue(&r, reconnected, now) {
		r.NextAttemptAt = now
	}
	c, err := Claim(r, l, now, ttl)
	if err != nil {
		return r, err
	}
	return MarkSending(c, l, now)
}

// MarkSending charges an attempt just before the record is handed to the
// transport. The charge is made first so that a crash mid-send still counts.
func MarkSending(r Record, l Lease, now time.Time) (Record, error) {
	if err := checkHolder("mark sending", &r, l); err != nil {
		return r, err
	}
	if r.Status != StatusLeased {
		return r, TransitionError("mark sending", r.Status)
	}
	r.Status = StatusSending
	r.Attempts++
	r.Sends++
	r.UpdatedAt = now
	return r, nil
}

// Ack settles a sent record with the receiver's answer.
func Ack(r Record, l Lease, now time.Time, resp StoredResponse) (Record, error) {
	if err := checkHolder("ack", &r, l); err != nil {
		return r, err
	}
	if r.Status != StatusSending {
		return r, TransitionError("ack", r.Status)
	}
	r.Status = StatusAcked
	r.AckedAt, r.UpdatedAt = now, now
	r.Response = &resp
	r.LastError = nil
	clearLease(&r)
	return r, nil
}

// Retry records a retryable failure: the record waits until next, or becomes
// a dead letter once its charged attempts reach MaxAttempts.
func Retry(r Record, l Lease, now, next time.Time, e ErrorInfo) (Record, error) {
	if err := checkHolder("retry", &r, l); err != nil {
		return r, err
	}
	if r.Status != StatusSending {
		return r, TransitionError("retry", r.Status)
	}
	return failed(r, now, next, e), nil
}

func failed(r Record, now, next time.Time, e ErrorInfo) Record {
	e.At = now
	r.LastError = &e
	r.UpdatedAt = now
	clearLease(&r)
	if r.MaxAttempts > 0 && r.Attempts >= r.MaxAttempts {
		r.Status = StatusDeadLetter
		return r
	}
	r.Status = StatusFailed
	r.NextAttemptAt = next
	return r
}

// Terminal settles a record that retrying cannot fix (validation, forbidden,
// unknown schema). It blocks its entity until the app resolves it.
func Terminal(r Record, l Lease, now time.Time, e ErrorInfo) (Record, error) {
	if err := checkHolder("terminal", &r, l); err != nil {
		return r, err
	}
	e.At = now
	r.Status, r.LastError, r.UpdatedAt = StatusTerminalFailed, &e, now
	clearLease(&r)
	return r, nil
}

// MarkConflict settles a record the receiver answered 409 (business conflict)
// for. Conflicts are domain truth: never retried automatically.
func MarkConflict(r Record, l Lease, now time.Time, e ErrorInfo) (Record, error) {
	if err := checkHolder("conflict", &r, l); err != nil {
		return r, err
	}
	if r.Status != StatusSending {
		return r, TransitionError("conflict", r.Status)
	}
	e.At = now
	r.Status, r.LastError, r.UpdatedAt = StatusConflict, &e, now
	clearLease(&r)
	return r, nil
}

// Refund returns a record to waiting without charging the attempt: used for
// 401 (auth, not the record's fault) and step-down (not this owner's to send).
// e may be nil when the record was never sent (lease released unused).
func Refund(r Record, l Lease, now time.Time, e *ErrorInfo) (Record, error) {
	if err := checkHolder("refund", &r, l); err != nil {
		return r, err
	}
	if r.Status == StatusSending && r.Attempts > 0 {
		r.Attempts--
	}
	if e != nil {
		ec := *e
		ec.At = now
		r.LastError = &ec
	}
	r.Status = waitingStatus(&r)
	r.NextAttemptAt, r.UpdatedAt = now, now
	clearLease(&r)
	return r, nil
}

// Unsend takes back the charge of a record that was marked sending but never
// handed to the transport (the flush charges a lane's next record one ahead,
// and a lane that stops gives it back): attempts and sends as before
// MarkSending, back to waiting, the lease released. A record not in sending
// is released as Refund does.
func Unsend(r Record, l Lease, now time.Time) (Record, error) {
	if r.Status != StatusSending {
		return Refund(r, l, now, nil)
	}
	if err := checkHolder("unsend", &r, l); err != nil {
		return r, err
	}
	if r.Sends > 0 {
		r.Sends--
	}
	return Refund(r, l, now, nil)
}

// LeaseExpired reports whether an in-flight record's lease ran out, so any
// current owner may recover it.
func LeaseExpired(r *Record, now time.Time) bool {
	return r.Status.InFlight() && !now.Before(r.LeaseExpiresAt)
}

// RecoverExpired makes an in-flight record whose lease expired retryable: a
// dead owner never strands a record. A leased record was never sent and goes
// back unchanged; a sending one may have reached the server, so its attempt
// stays charged (its idempotency key makes the resend safe) and it may become
// a dead letter.
func RecoverExpired(r Record, now time.Time) (Record, error) {
	if !r.Status.InFlight() {
		return r, TransitionError("recover", r.Status)
	}
	if now.Before(r.LeaseExpiresAt) {
		return r, &opError{op: "recover", detail: "lease not expired", err: ErrInvalidTransition}
	}
	if r.Status == StatusLeased {
		r.Status = waitingStatus(&r)
		r.UpdatedAt = now
		clearLease(&r)
		return r, nil
	}
	return failed(r, now, now, ErrorInfo{Code: "lease_expired", Message: "flush owner lost while sending"}), nil
}

// AppRetry puts a dead-letter, conflict or terminal record back in the queue
// with a fresh attempt budget. Its idempotency key is kept: it is the same
// command, and the server may already have applied it.
func AppRetry(r Record, now time.Time) (Record, error) {
	if !r.Status.Blocking() {
		return r, TransitionError("app retry", r.Status)
	}
	r.Status = StatusPending
	r.Attempts = 0
	r.NextAttemptAt, r.UpdatedAt = now, now
	clearLease(&r)
	return r, nil
}
