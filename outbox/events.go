package outbox

import "time"

// EventKind names a structured outbox event (reference section 23).
type EventKind string

const (
	EventEnqueue    EventKind = "outbox.enqueue"
	EventFlushStart EventKind = "outbox.flush.start"
	EventSkipLocked EventKind = "outbox.flush.skip_locked"
	EventClaim      EventKind = "outbox.record.claim"
	EventAck        EventKind = "outbox.record.ack"
	EventRetry      EventKind = "outbox.record.retry"
	EventTerminal   EventKind = "outbox.record.terminal"
	EventConflict   EventKind = "outbox.conflict"
	EventDeadLetter EventKind = "outbox.dead_letter"
	EventStepDown   EventKind = "outbox.flush.step_down"
	EventAuth       EventKind = "outbox.auth_required"
	EventOffline    EventKind = "outbox.offline"
	// EventUnsupported: a record's migration failed; it stays as stored,
	// unsent, counted as unsupported.
	EventUnsupported EventKind = "outbox.record.unsupported"
	EventFlushEnd    EventKind = "outbox.flush.end"
)

// Event is compact by design: it never carries the payload, and the
// operation key only as a short hash.
type Event struct {
	Kind             EventKind
	At               time.Time
	RecordID         string
	OperationKeyHash string
	Owner            string
	LeaseToken       uint64
	Attempt          int
	Duration         time.Duration
	Reason           string
	ErrorCode        string
}

// Events receives events. Emit must not block.
type Events interface{ Emit(Event) }

// EventsFunc adapts a function to Events.
type EventsFunc func(Event)

// Emit calls f.
func (f EventsFunc) Emit(e Event) { f(e) }

// Clock is injected so backoff, leases and the simulation use virtual time.
type Clock interface{ Now() time.Time }

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }
