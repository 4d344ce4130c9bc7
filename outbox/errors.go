package outbox

import (
	"errors"
	"strconv"
)

// Errors returned by transitions, stores and the Outbox. Compare with errors.Is.
var (
	// ErrStaleOwner: the caller's lease is no longer the current one, or the
	// record is not leased by it. A stale runner must change nothing.
	ErrStaleOwner = errors.New("outbox: stale owner")
	// ErrInvalidTransition: the record's status does not allow the change.
	ErrInvalidTransition = errors.New("outbox: invalid transition")
	// ErrNotFound: no record (or blob) with that id.
	ErrNotFound = errors.New("outbox: not found")
	// ErrStepDown: the server saw a higher fencing token; this owner lost
	// leadership and must stop flushing and release its lock.
	ErrStepDown = errors.New("outbox: lost leadership, step down")
	// ErrAuthRequired: the server answered 401; the user's queue is paused
	// until the app re-authenticates and calls Resume.
	ErrAuthRequired = errors.New("outbox: authentication required")
	// ErrPaused: the queue is paused (by the app or for auth).
	ErrPaused = errors.New("outbox: paused")
	// ErrNoSession: there is no logged-in user; nothing can be enqueued or sent.
	ErrNoSession = errors.New("outbox: no session")
	// ErrSessionChanged: the user logged out (or switched) during a flush;
	// the old user's records are handed back unsent.
	ErrSessionChanged = errors.New("outbox: session changed during flush")
	// ErrUnknownOperation: no dedupe policy is configured for the operation
	// type. Policies are configured, never guessed.
	ErrUnknownOperation = errors.New("outbox: no policy for operation type")
	// ErrLeaseHeld: another owner holds an unexpired lease.
	ErrLeaseHeld = errors.New("outbox: lease held by another owner")
	// ErrInvalidRecord: the record or operation is malformed.
	ErrInvalidRecord = errors.New("outbox: invalid record")
	// ErrSchemaUnsupported: a payload schema without a migration path.
	ErrSchemaUnsupported = errors.New("outbox: payload schema unsupported")
	// ErrOffline: a send failed while the device had no network (the
	// browser's navigator.onLine was false). It is not the record's fault:
	// the attempt is not charged, the flush stops, and the queue waits for
	// the network to come back (Outbox.Reconnected, the online event)
	// instead of burning attempts and backing off while offline. A
	// Transport returns it wrapped (errors.Is).
	ErrOffline = errors.New("outbox: offline")
)

// StepDownError is returned (wrapping ErrStepDown) when the receiver answered
// 409 with X-Fencing-Highest: Highest is the token the server accepted.
type StepDownError struct {
	Token   uint64 // this owner's server fencing token
	Highest uint64 // the highest token the server accepted (0 if unparsable)
}

func (e *StepDownError) Error() string {
	return "outbox: lost leadership: token " + strconv.FormatUint(e.Token, 10) +
		" < highest " + strconv.FormatUint(e.Highest, 10)
}

// Unwrap makes errors.Is(err, ErrStepDown) true.
func (e *StepDownError) Unwrap() error { return ErrStepDown }

// transitionError wraps ErrInvalidTransition with the statuses involved.
func transitionError(op string, from Status) error {
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

// Errors of durable stores (the IndexedDB store in the browser). They live
// in native code so store-independent code and tests can name them.
var (
	// ErrCorruptRecord: a stored value does not decode (see CorruptRecordError).
	ErrCorruptRecord = errors.New("outbox: corrupt record")
	// ErrStoreClosed: the connection is closed (Close, or another tab
	// deleted or upgraded the database, or the browser closed it). Every
	// later call fails with it; open a new store to continue.
	ErrStoreClosed = errors.New("outbox: store closed")
	// ErrStoreDeleted: another tab deleted the database (matches ErrStoreClosed).
	ErrStoreDeleted = &closedError{"outbox: store database deleted by another connection"}
	// ErrStoreUpgraded: another tab opened a newer schema version (matches
	// ErrStoreClosed): this tab runs an old build and should reload.
	ErrStoreUpgraded = &closedError{"outbox: store database upgraded by another connection"}
	// ErrTxAborted: the transaction was rolled back; nothing it wrote stays.
	// The cause, when IndexedDB gave one, is in the chain too (for example
	// jsglue.ErrQuotaExceeded).
	ErrTxAborted = errors.New("outbox: indexeddb transaction aborted")
)

type closedError struct{ msg string }

func (e *closedError) Error() string        { return e.msg }
func (e *closedError) Is(target error) bool { return target == ErrStoreClosed }
