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
	if gen != l.gen || l.socketless() {
		return nil
	}
	l.failAt, l.version = l.version, l.rewind
	l.failed++
	acts := l.lost(now, "replica write failed")
	l.attempt = l.failed
	l.nextDial = now.Add(l.cfg.Backoff.Delay(l.attempt, 0, false))
	return acts
}
