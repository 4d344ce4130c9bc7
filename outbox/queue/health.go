package queue

import "time"

// FlushHealth is what one Flush learned about sending, in the order its
// sends settled: the last failure (nil once a later send got an answer
// that is not one), whether the server answered, and the earliest retry
// time of its failed records.
type FlushHealth struct {
	Failure *SendFailure
	Reached bool
	Next    time.Time
}

// Observe feeds one settled send: e its error (nil for an ack), n the
// record as written.
func (h *FlushHealth) Observe(e *ErrorInfo, n *Record) {
	if e == nil {
		if n.Status == StatusAcked {
			h.Failure, h.Reached, h.Next = nil, true, time.Time{}
		}
		return
	}
	k, ok := FailureOf(*e)
	if !ok {
		if e.Status != 0 { // an answer about the record: the server works
			h.Failure, h.Reached, h.Next = nil, true, time.Time{}
		}
		return
	}
	if n.Status.Settled() {
		// Dead-lettered: nothing retries it, so it says nothing about
		// sending from now on.
		return
	}
	f := SendFailure{Kind: k, Error: *e}
	if n.Status == StatusFailed && k != FailureOffline && k != FailurePausedAuth {
		if h.Next.IsZero() || n.NextAttemptAt.Before(h.Next) {
			h.Next = n.NextAttemptAt
		}
		f.NextAttemptAt = h.Next
	}
	h.Failure = &f
}
