package realtime

import "time"

// Failed reports that the app could not perform the replica action
// (Deliver or ResetReplica) it was just handed for socket gen: a quota, a
// failed snapshot fetch, a closed database. The version goes back to what
// the replica holds, and the socket is dropped and redialed after a backoff
// (which grows while the same write keeps failing, even across readies),
// so the server sends the lost delta, or the reset, again. Nothing is
// announced: the followers never hear of a version the replica lacks.
func (l *Leader) Failed(now time.Time, gen uint64) []Action {
	if gen != l.gen {
		return nil
	}
	l.failAt, l.version = l.version, l.rewind
	l.failed++
	var acts []Action
	if !l.socketless() {
		acts = l.lost(now, "replica write failed")
	}
	// The socket may have ended already (the batch's write ran on its close):
	// the version still goes back, and an offline leader redials later.
	l.attempt = l.failed
	if l.state == Offline {
		l.nextDial = now.Add(l.cfg.Backoff.Delay(l.attempt, 0, false))
	}
	return acts
}
