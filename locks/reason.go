package locks

import "strconv"

// Reason says why a leadership ended (Config.OnLost).
type Reason int

const (
	// ReasonResigned: Election.Resign; the election rejoins the queue at
	// the back so another tab can lead.
	ReasonResigned Reason = iota
	// ReasonClosed: Election.Close.
	ReasonClosed
	// ReasonStolen: another request took the lock with Steal. The
	// election rejoins the queue as a follower; it does not fight back.
	ReasonStolen
	// ReasonFenced: Leadership.StepDown after a write or message was
	// rejected as stale: a newer leader exists, so acting on would be
	// split-brain. The election rejoins after a short backoff.
	ReasonFenced
	// ReasonError: token allocation failed, a callback panicked, or the
	// lock request failed. The election rejoins after a backoff.
	ReasonError
)

// String returns "resigned", "closed", "stolen", "fenced" or "error": the
// strings the JS API hands to onLost.
func (r Reason) String() string {
	switch r {
	case ReasonResigned:
		return "resigned"
	case ReasonClosed:
		return "closed"
	case ReasonStolen:
		return "stolen"
	case ReasonFenced:
		return "fenced"
	case ReasonError:
		return "error"
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// sentinel is the error a reason matches with errors.Is.
func (r Reason) sentinel() error {
	switch r {
	case ReasonResigned:
		return ErrResigned
	case ReasonClosed:
		return ErrClosed
	case ReasonStolen:
		return ErrStolen
	case ReasonFenced:
		return ErrFenced
	}
	return nil
}

// LostError is how a leadership ended: the error OnLost receives, and the
// cause of Leadership.Ctx after StepDown or Resign (context.Cause). It
// matches the reason's sentinel (ErrStolen, ErrClosed, ErrResigned,
// ErrFenced) and unwraps to the underlying error (the stale-write rejection
// passed to StepDown, the token allocation error, a *PanicError).
type LostError struct {
	Reason   Reason
	Resource string
	Token    uint64
	Err      error
}

func (e *LostError) Error() string {
	s := "locks: lost leadership"
	if e.Resource != "" {
		s += " of " + e.Resource
	}
	s += " (" + e.Reason.String()
	if e.Token != 0 {
		s += ", token " + strconv.FormatUint(e.Token, 10)
	}
	s += ")"
	if e.Err != nil && e.Err != e.Reason.sentinel() {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *LostError) Unwrap() []error {
	out := make([]error, 0, 2)
	if s := e.Reason.sentinel(); s != nil {
		out = append(out, s)
	}
	if e.Err != nil {
		out = append(out, e.Err)
	}
	return out
}

// JSName is the error name JavaScript sees.
func (e *LostError) JSName() string { return "LostLeadershipError" }

// classify maps the cause that ended a leadership to a LostError.
func classify(cause error) *LostError {
	if le, ok := cause.(*LostError); ok {
		c := *le
		return &c
	}
	r := ReasonError
	for _, c := range []Reason{ReasonStolen, ReasonClosed, ReasonResigned, ReasonFenced} {
		if isErr(cause, c.sentinel()) {
			r = c
			break
		}
	}
	return &LostError{Reason: r, Err: cause}
}
