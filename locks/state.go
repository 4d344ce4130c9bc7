package locks

import (
	"errors"
	"time"
)

func isErr(err, target error) bool { return errors.Is(err, target) }

// phase is where an election stands.
type phase uint8

const (
	phaseIdle      phase = iota // created, not started
	phaseJoining                // in the lock queue, or about to enter it
	phaseBackoff                // released after a failure; rejoins after a delay
	phaseAcquiring              // lock granted; fencing token being allocated
	phaseLeading                // holds the lock and a token; OnLeader called
	phaseClosed                 // Close called; terminal
)

func (p phase) String() string {
	return [...]string{"idle", "joining", "backoff", "acquiring", "leading", "closed"}[p]
}

// Backoff after failed leaderships (allocation error, fenced step-down,
// panics): doubles from backoffMin up to backoffMax, so a broken fencer or
// a leader that keeps being rejected never spins.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

func backoff(failures int) time.Duration {
	if failures <= 0 {
		return 0
	}
	d := backoffMin
	for i := 1; i < failures && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// machine is the election's state, with no I/O: the Election calls it
// under its mutex and acts on what it returns. Kept apart so every
// transition is tested natively.
type machine struct {
	phase      phase
	generation int           // leaderships granted so far
	failures   int           // consecutive failed leaderships
	delay      time.Duration // wait before the next join (phaseBackoff)
	resign     bool          // Resign arrived while acquiring
	steal      bool          // the next join uses Steal
}

// start: idle → joining. started is false when it already ran.
func (m *machine) start() (started bool, err error) {
	switch m.phase {
	case phaseClosed:
		return false, ErrClosed
	case phaseIdle:
		m.phase = phaseJoining
		return true, nil
	}
	return false, nil
}

type actionKind uint8

const (
	actStop actionKind = iota // closed: the loop ends
	actWait                   // sleep delay, then ask again
	actJoin                   // issue a lock request (steal says how)
)

type action struct {
	kind  actionKind
	delay time.Duration
	steal bool
}

// next tells the election loop what to do after a request ended.
func (m *machine) next() action {
	if m.phase == phaseClosed {
		return action{kind: actStop}
	}
	if m.steal {
		m.steal = false
		m.delay = 0
		m.phase = phaseJoining
		return action{kind: actJoin, steal: true}
	}
	if m.delay > 0 {
		d := m.delay
		m.delay = 0
		m.phase = phaseBackoff
		return action{kind: actWait, delay: d}
	}
	m.phase = phaseJoining
	return action{kind: actJoin}
}

// granted: the browser granted the lock. ok is false when the election
// closed meanwhile (release at once). It starts a new generation.
func (m *machine) granted() (generation int, ok bool) {
	if m.phase != phaseJoining {
		return 0, false
	}
	m.phase = phaseAcquiring
	m.resign = false
	m.generation++
	return m.generation, true
}

// allocated: the token is ready. lead is false when Resign or Close came
// while acquiring; cause then says which.
func (m *machine) allocated() (lead bool, cause error) {
	switch {
	case m.phase == phaseClosed:
		return false, ErrClosed
	case m.phase != phaseAcquiring:
		return false, ErrClosed
	case m.resign:
		m.resign = false
		return false, ErrResigned
	}
	m.phase = phaseLeading
	return true, nil
}

// ended: a granted lock is being released for reason r. Failures back off;
// resign and steal rejoin at once (at the back of the queue, as a follower).
func (m *machine) ended(r Reason) {
	if m.phase == phaseClosed {
		return
	}
	switch r {
	case ReasonError, ReasonFenced:
		m.failures++
		m.delay = backoff(m.failures)
	default:
		m.failures = 0
		m.delay = 0
	}
	m.phase = phaseJoining
}

// failed: a lock request failed before anything was granted.
func (m *machine) failed() {
	if m.phase == phaseClosed {
		return
	}
	m.failures++
	m.delay = backoff(m.failures)
	m.phase = phaseJoining
}

type resignAction uint8

const (
	resignNothing resignAction = iota // not leading: nothing to give up
	resignNow                         // end the current leadership
	resignLater                       // acquiring: release once the token is in
	resignClosed                      // closed
)

func (m *machine) resignReq() resignAction {
	switch m.phase {
	case phaseClosed:
		return resignClosed
	case phaseLeading:
		return resignNow
	case phaseAcquiring:
		m.resign = true
		return resignLater
	}
	return resignNothing
}

type stealAction uint8

const (
	stealClosed   stealAction = iota
	stealLeading              // already leads
	stealStart                // was idle: start the loop, stealing
	stealWithdraw             // waiting: withdraw the queued request, then steal
	stealWake                 // backing off: wake up and steal
	stealWait                 // acquiring: leadership (or failure) is imminent
)

func (m *machine) stealReq() stealAction {
	switch m.phase {
	case phaseClosed:
		return stealClosed
	case phaseLeading:
		return stealLeading
	case phaseAcquiring:
		return stealWait
	case phaseIdle:
		m.phase = phaseJoining
		m.steal = true
		return stealStart
	case phaseBackoff:
		m.steal = true
		return stealWake
	}
	m.steal = true
	return stealWithdraw
}

// close: → closed. first is false on repeated calls; wasIdle says the loop
// never started.
func (m *machine) close() (first, wasIdle bool) {
	if m.phase == phaseClosed {
		return false, false
	}
	wasIdle = m.phase == phaseIdle
	m.phase = phaseClosed
	m.steal = false
	return true, wasIdle
}

func (m *machine) leading() bool { return m.phase == phaseLeading }
