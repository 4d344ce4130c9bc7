package queue

import "errors"

// Errors of the transitions, the plans and the lease rules. Compare with
// errors.Is. (The Outbox's and the stores' own errors are in package outbox.)
var (
	// ErrStaleOwner: the caller's lease is no longer the current one, or the
	// record is not leased by it. A stale runner must change nothing.
	ErrStaleOwner = errors.New("outbox: stale owner")
	// ErrInvalidTransition: the record's status does not allow the change.
	ErrInvalidTransition = errors.New("outbox: invalid transition")
	// ErrUnknownOperation: no dedupe policy is configured for the operation
	// type. Policies are configured, never guessed.
	ErrUnknownOperation = errors.New("outbox: no policy for operation type")
	// ErrLeaseHeld: another owner holds an unexpired lease.
	ErrLeaseHeld = errors.New("outbox: lease held by another owner")
	// ErrInvalidRecord: the record or operation is malformed.
	ErrInvalidRecord = errors.New("outbox: invalid record")
	// ErrSchemaUnsupported: a payload schema without a migration path.
	ErrSchemaUnsupported = errors.New("outbox: payload schema unsupported")
)

// TransitionError is the error of transition op on a record in status from:
// ErrInvalidTransition, with the status it was refused from.
func TransitionError(op string, from Status) error {
	return &opError{op: op, detail: "from " + string(from), err: ErrInvalidTransition}
}

// OpError is the error of operation op on bad input: "outbox: op: detail:
// err", errors.Is-able as err (ErrInvalidRecord, ErrNotFound, ...).
func OpError(op, detail string, err error) error {
	return &opError{op: op, detail: detail, err: err}
}

type opError struct {
	op, detail string
	err        error
}

func (e *opError) Error() string { return "outbox: " + e.op + ": " + e.detail + ": " + e.err.Error() }
func (e *opError) Unwrap() error { return e.err }
