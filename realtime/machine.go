// Package realtime is the client core of a realtime connection: the rules
// of the leader tab that holds the browser's one WebSocket, and of the
// followers that share its data, in Go that builds natively and is tested
// on a virtual clock. The browser wiring (the socket, the fenced channel,
// the IndexedDB replica) drives these types; nothing here calls syscall/js.
//
// Leader is an event-driven state machine: every input (a dial's result, a
// message, a close, a tick of its clock, the page's online and visible
// events) returns the actions to perform, so its rules (liveness, backoff,
// resend after ready, the version rule) run the same under a simulation and
// in a page. Run drives it over a Socket in real time.
package realtime

import (
	"errors"
	"time"

	"github.com/tabfence/tabfence/outbox"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// State is the leader's connection state, as every tab shows it.
type State int

const (
	// Offline: no socket; a dial is scheduled (NextDial) after a failure.
	Offline State = iota
	// Connecting: dialing, or waiting for the server's ready.
	Connecting
	// Ready: the server said ready; mutations are sent as they are made.
	Ready
	// Unauthorized: the server refused the session. The leader does not
	// retry by itself (that could join one person's replica to another
	// person's session); it retries when asked (Retry).
	Unauthorized
	// Outdated: the server does not speak this client's protocol (close
	// code 4426). Retrying will not change that, so the leader waits,
	// with no timer, until asked (Retry: a new tab, or the page reloaded
	// with a build the server speaks).
	Outdated
)

// String names the state for a status line.
func (s State) String() string {
	switch s {
	case Offline:
		return "offline"
	case Connecting:
		return "connecting"
	case Ready:
		return "ready"
	case Unauthorized:
		return "unauthorized"
	case Outdated:
		return "outdated"
	}
	return "unknown"
}

// ErrUnauthorized is what a Dialer returns (wrapped) when the upgrade was
// refused with 401: the session ended.
var ErrUnauthorized = errors.New("realtime: unauthorized")

// Defaults for Config fields left zero.
const (
	DefaultPingEvery   = 30 * time.Second
	DefaultPongTimeout = 10 * time.Second
)

// Config tunes a Leader.
type Config struct {
	// PingEvery is the interval between pings on a ready connection.
	PingEvery time.Duration
	// PongTimeout is how long a ping (or the hello) may go unanswered
	// before the connection counts as lost and is replaced.
	PongTimeout time.Duration
	// Backoff spaces reconnects (full jitter); default outbox.Backoff's
	// defaults (1 s doubling to 5 min).
	Backoff *outbox.Backoff
	// User is the user the replica belongs to (wire.FormatClientUser's
	// form), sent in Hello: the server refuses credentials of another
	// user, and the leader then waits like an unauthorized one.
	User string
}

// Action is something the machine asks its driver to do; one of the types
// below.
type Action interface{ action() }

type (
	// Dial opens socket Gen.
	Dial struct{ Gen uint64 }
	// Send writes Msg on socket Gen.
	Send struct {
		Gen uint64
		Msg rt.Message
	}
	// CloseSocket closes socket Gen (its later events are ignored).
	CloseSocket struct {
		Gen    uint64
		Reason string
	}
	// Deliver hands a server delta, in version order, to the app: write it
	// to the replica, then announce it to the followers.
	Deliver struct{ Delta rt.Delta }
	// ResetReplica: the server no longer holds the deltas after the
	// replica's version; reload a snapshot at Version.
	ResetReplica struct{ Version uint64 }
	// Settled announces a mutation's outcome (to every tab).
	Settled struct {
		ID      string
		Outcome Outcome
	}
	// StateChanged reports the new connection state.
	StateChanged struct{ State State }
)

func (Dial) action()         {}
func (Send) action()         {}
func (CloseSocket) action()  {}
func (Deliver) action()      {}
func (ResetReplica) action() {}
func (Settled) action()      {}
func (StateChanged) action() {}

// Leader is the connection state machine of the tab that holds the socket.
// It is not safe for concurrent use: one driver feeds it.
type Leader struct {
	cfg     Config
	state   State
	gen     uint64 // the current socket; 0 before the first dial
	attempt int    // consecutive failures, for the backoff
	version uint64 // the replica version the server's deltas have reached
	rewind  uint64 // the version before the last replica action (Failed goes back to it)
	failed  int    // consecutive failed replica actions, for the backoff
	failAt  uint64 // the version whose replica action failed last
	pending *Pending

	nextDial time.Time // Offline: when to dial
	pingAt   time.Time // Ready: when to ping
	pongBy   time.Time // Connecting or a ping out: the answer's deadline
	nonce    uint64
}

// NewLeader returns a leader whose replica is at version, sending the
// mutations of pending (the tab's list, restored from storage).
func NewLeader(cfg Config, version uint64, pending *Pending) *Leader {
	if cfg.PingEvery <= 0 {
		cfg.PingEvery = DefaultPingEvery
	}
	if cfg.PongTimeout <= 0 {
		cfg.PongTimeout = DefaultPongTimeout
	}
	if cfg.Backoff == nil {
		cfg.Backoff = &outbox.Backoff{}
	}
	if pending == nil {
		pending = NewPending()
	}
	return &Leader{cfg: cfg, version: version, pending: pending}
}

// State is the connection state.
func (l *Leader) State() State { return l.state }

// Version is the replica version reached.
func (l *Leader) Version() uint64 { return l.version }

// Pending is the leader's list of unsettled mutations.
func (l *Leader) Pending() *Pending { return l.pending }

// Deadline is the next time Tick has something to do (zero: nothing).
func (l *Leader) Deadline() time.Time {
	var d time.Time
	for _, t := range []time.Time{l.nextDial, l.pingAt, l.pongBy, l.nextRetry()} {
		if !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	return d
}

// Start dials the first connection.
func (l *Leader) Start(now time.Time) []Action { return l.dial(now) }

func (l *Leader) dial(now time.Time) []Action {
	l.gen++
	l.nextDial, l.pingAt = time.Time{}, time.Time{}
	l.pongBy = now.Add(l.cfg.PongTimeout) // bounds the dial and the hello
	return l.to(Connecting, Dial{Gen: l.gen})
}

func (l *Leader) to(s State, acts ...Action) []Action {
	if s != l.state {
		l.state = s
		acts = append(acts, StateChanged{State: s})
	}
	return acts
}

// lost ends socket gen after a failure and schedules the next dial.
func (l *Leader) lost(now time.Time, reason string) []Action {
	acts := []Action{CloseSocket{Gen: l.gen, Reason: reason}}
	l.gen++ // nothing more from the old socket counts
	l.attempt++
	l.pingAt, l.pongBy = time.Time{}, time.Time{}
	l.nextDial = now.Add(l.cfg.Backoff.Delay(l.attempt, 0, false))
	return l.to(Offline, acts...)
}

func (l *Leader) unauthorized() []Action { return l.park(Unauthorized) }

// park ends the socket and waits in s (Unauthorized or Outdated) with no
// timer: only Retry dials again.
func (l *Leader) park(s State) []Action {
	acts := []Action{CloseSocket{Gen: l.gen, Reason: s.String()}}
	l.gen++
	l.nextDial, l.pingAt, l.pongBy = time.Time{}, time.Time{}, time.Time{}
	return l.to(s, acts...)
}

// socketless reports a state without a socket whose events could count.
func (l *Leader) socketless() bool {
	return l.state == Offline || l.state == Unauthorized || l.state == Outdated
}

// Dialed reports socket gen's dial: err nil when it is open.
func (l *Leader) Dialed(now time.Time, gen uint64, err error) []Action {
	if gen != l.gen || l.state != Connecting {
		return nil
	}
	if errors.Is(err, ErrUnauthorized) {
		return l.unauthorized()
	}
	if err != nil {
		return l.lost(now, "dial failed")
	}
	return []Action{Send{Gen: gen, Msg: rt.Hello{Protocol: rt.Protocol, Version: l.version, User: l.cfg.User}}}
}

// Closed reports that socket gen ended, with the close code (-1 when the
// socket broke without one).
func (l *Leader) Closed(now time.Time, gen uint64, code int) []Action {
	if gen != l.gen || l.socketless() {
		return nil
	}
	switch code {
	case rt.CloseUnauthorized, rt.CloseSession:
		return l.unauthorized()
	case rt.CloseProtocol:
		return l.park(Outdated)
	}
	return l.lost(now, "closed")
}

// Gen is the current socket's generation (the Gen of the last Dial).
func (l *Leader) Gen() uint64 { return l.gen }
