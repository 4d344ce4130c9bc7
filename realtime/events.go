package realtime

import (
	"time"

	rt "github.com/tabfence/tabfence/wire/realtime"
)

// Received handles a message from socket gen.
func (l *Leader) Received(now time.Time, gen uint64, m rt.Message) []Action {
	if gen != l.gen || l.socketless() {
		return nil
	}
	switch v := m.(type) {
	case rt.Ready:
		return l.ready(now, v)
	case rt.Delta:
		return l.delta(now, v)
	case rt.Ack:
		return l.settle(v.ID, Outcome{Ack: &v})
	case rt.Reject:
		return l.rejected(now, v)
	case rt.Pong:
		if v.Nonce == l.nonce && l.state == Ready {
			l.pongBy = time.Time{}
		}
		return nil
	case rt.Error:
		switch v.Problem.Status {
		case 401, 403:
			return l.unauthorized()
		case 426:
			return l.park(Outdated)
		}
		return nil // the close that follows decides
	}
	return l.lost(now, "unexpected "+m.Type().String())
}

// ready: the connection is usable; every pending mutation is (re)sent, in
// the order it was made. The server applies an id once, so sending one
// the previous leader already sent is safe: it is answered with the
// stored ack.
func (l *Leader) ready(now time.Time, r rt.Ready) []Action {
	if l.state != Connecting {
		return l.lost(now, "ready twice")
	}
	l.attempt = 0
	l.pongBy = time.Time{}
	l.pingAt = now.Add(l.cfg.PingEvery)
	var acts []Action
	if r.Reset {
		l.rewind, l.version = l.version, r.Version
		acts = append(acts, ResetReplica{Version: r.Version})
	}
	for _, m := range l.pending.List() {
		l.pending.byID[m.ID].retryAt = time.Time{}
		acts = append(acts, Send{Gen: l.gen, Msg: m})
	}
	return l.to(Ready, acts...)
}

// delta applies the server's deltas in version order. A gap (the server
// skipped a version) is repaired by reconnecting at once with the version
// reached: the server sends what is missing.
func (l *Leader) delta(now time.Time, d rt.Delta) []Action {
	switch {
	case l.state != Ready:
		return l.lost(now, "delta before ready")
	case d.Version <= l.version:
		return nil
	case d.Prev != l.version:
		acts := l.lost(now, "version gap")
		l.attempt = 0
		l.nextDial = now
		return acts
	}
	if l.version >= l.failAt {
		l.failed = 0 // the write that failed last is stored now
	}
	l.rewind, l.version = l.version, d.Version
	return []Action{Deliver{Delta: d}}
}

// settle ends id in the leader's list and announces it. An id the leader
// no longer holds is announced too: a follower may still be waiting for it.
func (l *Leader) settle(id string, o Outcome) []Action {
	l.pending.Settle(id, o)
	return []Action{Settled{ID: id, Outcome: o}}
}

// rejected settles a final rejection; a retryable one (nothing stored: the
// server failed or the first attempt is still running) keeps the mutation
// and resends it after a backoff.
func (l *Leader) rejected(now time.Time, r rt.Reject) []Action {
	e := l.pending.byID[r.ID]
	if !r.Retry || e == nil {
		return l.settle(r.ID, Outcome{Reject: &r})
	}
	e.tries++
	e.retryAt = now.Add(l.cfg.Backoff.Delay(e.tries, 0, false))
	return nil
}

func (l *Leader) nextRetry() time.Time {
	if l.state != Ready {
		return time.Time{}
	}
	var t time.Time
	for _, e := range l.pending.byID {
		if !e.retryAt.IsZero() && (t.IsZero() || e.retryAt.Before(t)) {
			t = e.retryAt
		}
	}
	return t
}

// Tick runs the timers due at now: a scheduled dial, a lost pong, a ping,
// the resend of retryable rejects.
func (l *Leader) Tick(now time.Time) []Action {
	switch {
	case l.state == Offline && !l.nextDial.IsZero() && !now.Before(l.nextDial):
		return l.dial(now)
	case (l.state == Connecting || l.state == Ready) && !l.pongBy.IsZero() && !now.Before(l.pongBy):
		return l.lost(now, "no answer")
	case l.state != Ready:
		return nil
	}
	var acts []Action
	if !now.Before(l.pingAt) {
		acts = append(acts, l.ping(now)...)
	}
	for _, m := range l.pending.List() {
		if e := l.pending.byID[m.ID]; !e.retryAt.IsZero() && !now.Before(e.retryAt) {
			e.retryAt = time.Time{}
			acts = append(acts, Send{Gen: l.gen, Msg: m})
		}
	}
	return acts
}

func (l *Leader) ping(now time.Time) []Action {
	l.nonce++
	l.pingAt = now.Add(l.cfg.PingEvery)
	if l.pongBy.IsZero() {
		l.pongBy = now.Add(l.cfg.PongTimeout)
	}
	return []Action{Send{Gen: l.gen, Msg: rt.Ping{Nonce: l.nonce}}}
}

// Online handles the browser's online event: a leader waiting to redial
// dials at once.
func (l *Leader) Online(now time.Time) []Action {
	if l.state == Offline {
		l.attempt = 0
		return l.dial(now)
	}
	return nil
}

// Visible handles the page becoming visible: a leader waiting to redial
// dials at once, and a ready one pings, so a socket that died while the
// page was hidden is replaced within PongTimeout.
func (l *Leader) Visible(now time.Time) []Action {
	switch l.state {
	case Offline:
		l.attempt = 0
		return l.dial(now)
	case Ready:
		return l.ping(now)
	}
	return nil
}

// Retry is a new tab asking for the status: an unauthorized leader tries
// again (the person may have signed in again in that tab), and so does an
// outdated one (the server may have been upgraded). Only then: see
// Unauthorized and Outdated.
func (l *Leader) Retry(now time.Time) []Action {
	if l.state == Unauthorized || l.state == Outdated {
		l.attempt = 0
		return l.dial(now)
	}
	return nil
}

// Mutate takes a mutation made in any tab (already in that tab's durable
// pending store) and sends it when the connection is ready; otherwise it
// waits for the next ready. It returns the channel its outcome arrives on.
func (l *Leader) Mutate(now time.Time, m rt.Mutation) (<-chan Outcome, []Action) {
	had := l.pending.Has(m.ID)
	ch := l.pending.Add(m, now)
	if had || l.state != Ready {
		return ch, nil
	}
	return ch, []Action{Send{Gen: l.gen, Msg: m}}
}

// lostIf ends socket gen, when it is still the current one, after a
// failure on the client's side (a message that does not decode).
func (l *Leader) lostIf(now time.Time, gen uint64, reason string) []Action {
	if gen != l.gen || l.socketless() {
		return nil
	}
	return l.lost(now, reason)
}
