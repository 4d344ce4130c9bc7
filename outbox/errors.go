package outbox

import (
	"errors"
	"strconv"
)

// Errors returned by stores and the Outbox. Compare with errors.Is. (The
// transitions' and the plans' errors are in outbox/queue.)
var (
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
	// ErrOffline: a send failed while the device had no network (the
	// browser's navigator.onLine was false). It is not the record's fault:
	// the attempt is not charged, the flush stops, and the queue waits for
	// the network to come back (Outbox.Reconnected, the online event)
	// instead of burning attempts and backing off while offline. A
	// Transport returns it wrapped (errors.Is).
	ErrOffline = errors.New("outbox: offline")
	// ErrResponseTooLarge: the receiver's answer was larger than the
	// Transport reads (the browser transport's MaxResponseBytes). A
	// Transport returns it wrapped (errors.Is) as a Send error: no usable
	// answer, so a record sent alone is retried; a batch's answer too large
	// is a page too large, refunded and halved as after a 413.
	ErrResponseTooLarge = errors.New("outbox: response body too large")
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
