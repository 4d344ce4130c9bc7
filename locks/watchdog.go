package locks

import "time"

// The election's watchdog (Config.StallAfter): the rules, with no I/O, on
// a clock the caller passes in, so every one is tested natively. The
// browser half (watchdog_js.go) posts the heartbeats, listens, and reads
// the page's visibility and lifecycle.
//
// A Web Lock is held for as long as its tab lives, whether or not the tab
// still runs: a frozen or hung leader keeps it until someone steals. So the
// leader posts a heartbeat — its token and the time, nothing else — every
// HeartbeatEvery from a timer task, which a frozen or hung page never runs,
// and a follower that hears none for StallAfter steals. The steal is safe
// because a watchdog election is fenced: the resumed leader's writes carry
// the older token and are rejected.
//
// Why these numbers. Chromium runs a hidden page's timers at most once a
// second (aligned to whole seconds), so a hidden leader's heartbeats arrive
// about a second apart, two seconds when a wake-up is missed: MinStallAfter
// leaves a missed wake-up of margin, DefaultStallAfter three. Chromium's
// intensive throttling (one wake-up a minute, for chained timers — set from
// a timer task five deep — in a page hidden for a while: 5 minutes, 1 for a
// page that finished loading in the background) would make that a minute,
// so each heartbeat timer is set from a MessageChannel task, never from the
// previous timer's: its chain stays one long. Left: Chromium's 1 % CPU
// budget for a hidden page's timers, which a hidden leader whose own timers
// burn more than that can exhaust; give such an app a longer StallAfter.
const (
	// MinStallAfter is the shortest Config.StallAfter accepted.
	MinStallAfter = 3 * time.Second
	// DefaultStallAfter is what the JavaScript API's stallAfter: true asks for.
	DefaultStallAfter = 5 * time.Second
	// MaxStallAfter bounds Config.StallAfter (a browser timer's limit is
	// about 24 days; a longer watchdog is a typo).
	MaxStallAfter = time.Hour
	// HeartbeatEvery is how often a watched leader posts a heartbeat
	// while its page runs timers freely: under the 1 s of a hidden page's
	// wake-ups, so a hidden leader still beats once a second.
	HeartbeatEvery = 500 * time.Millisecond
	// maxJitter bounds the random delay added to each follower's steal
	// (at most a tenth of StallAfter), so that several visible followers
	// do not all steal at the same moment: the first to steal heartbeats
	// at once and the others hear it before their own time comes.
	maxJitter = 250 * time.Millisecond
)

// ValidStallAfter checks Config.StallAfter: 0 (off) or MinStallAfter to
// MaxStallAfter, and only with a Fencer, because the watchdog steals and a
// steal is safe only when the old leader's late writes are fenced. The
// JavaScript API's elect() reports its error as a TypeError, so the rule is
// this one function. errStallAfterRange spells the bounds out (a constant
// message costs the download less than a formatted one; a test checks it).
func ValidStallAfter(d time.Duration, fenced bool) error {
	switch {
	case d == 0:
		return nil
	case d < MinStallAfter || d > MaxStallAfter:
		return wrap(ErrInvalidOptions, errStallAfterRange)
	case !fenced:
		return wrap(ErrInvalidOptions, "stallAfter needs a fenced election (give a resource, or fenced: true): the watchdog steals, and only fencing makes the old leader's late writes harmless")
	}
	return nil
}

const errStallAfterRange = "stallAfter must be 0 (no watchdog) or a whole number of milliseconds from 3000 to 3600000 (5000 by default)"

// HeartbeatChannel is the BroadcastChannel an election's heartbeats go on:
// its lock name plus "#heartbeat" (never a lock name, which ends in
// ":v<protocol>"), apart from the app's channel so no subscriber sees them.
func HeartbeatChannel(lockName string) string { return lockName + "#heartbeat" }

// WatchStats counts what a watchdog heard and did.
type WatchStats struct {
	Heard     uint64 // heartbeats that restarted the stall timer
	Stale     uint64 // heartbeats with a token below one already heard: dropped
	Malformed uint64 // messages on the heartbeat channel that are not heartbeats: dropped
	Steals    uint64 // times the watchdog decided to steal
}

// Watchdog is a follower's stall detector. Feed it what the tab observes;
// call Tick at Deadline; steal when Tick says so.
//
// It watches only while this election waits in the queue (Follow … Stop),
// and may steal only while the page is visible and not frozen: a hidden tab
// is where the user is not, and its own timers are the throttled ones. The
// stall is timed from the latest of: the last heartbeat, joining the queue,
// becoming visible, resuming — never from before this tab could have heard
// one, so a tab that was itself frozen or asleep does not steal on
// heartbeats it could not hear.
type Watchdog struct {
	stallAfter time.Duration
	jitterMax  time.Duration
	rand       func(n int64) int64 // uniform in [0, n)

	following, visible, frozen bool
	since                      time.Time // start of the current silence
	jitter                     time.Duration
	highest                    uint64 // highest token heard or held
	stats                      WatchStats
}

// NewWatchdog returns a watchdog for stallAfter (> 0) that is not
// following yet. rand draws the jitter: uniform in [0, n).
func NewWatchdog(stallAfter time.Duration, rand func(n int64) int64) *Watchdog {
	return &Watchdog{stallAfter: stallAfter, jitterMax: min(stallAfter/10, maxJitter), rand: rand}
}

// StallAfter is the configured silence before a steal.
func (w *Watchdog) StallAfter() time.Duration { return w.stallAfter }

// Stats returns the counters.
func (w *Watchdog) Stats() WatchStats { return w.stats }

func (w *Watchdog) restart(now time.Time) {
	w.since = now
	w.jitter = 0
	if w.jitterMax > 0 {
		w.jitter = time.Duration(w.rand(int64(w.jitterMax)))
	}
}

// Follow: this election waits in the queue behind another leader.
func (w *Watchdog) Follow(now time.Time) {
	if !w.following {
		w.following = true
		w.restart(now)
	}
}

// Stop: this election leads, is acquiring, backing off, or closed.
func (w *Watchdog) Stop() { w.following = false }

// Led records the token of this election's own leadership, so a late
// heartbeat of an older leader is not taken for a live one.
func (w *Watchdog) Led(token uint64) { w.highest = max(w.highest, token) }

// Heard feeds a valid heartbeat carrying token. It restarts the stall
// timer unless an equal or higher token was heard before: a leader older
// than one already heard (a deposed leader's last beat) proves nothing.
func (w *Watchdog) Heard(now time.Time, token uint64) {
	if token < w.highest {
		w.stats.Stale++
		return
	}
	w.highest = token
	w.stats.Heard++
	if w.following {
		w.restart(now)
	}
}

// Malformed counts a message on the heartbeat channel that was dropped.
func (w *Watchdog) Malformed() { w.stats.Malformed++ }

// SetVisible feeds document.visibilityState. Becoming visible restarts the
// stall timer.
func (w *Watchdog) SetVisible(now time.Time, visible bool) {
	if visible && !w.visible && w.following {
		w.restart(now)
	}
	w.visible = visible
}

// SetFrozen feeds the page's freeze and resume events. Resuming restarts
// the stall timer.
func (w *Watchdog) SetFrozen(now time.Time, frozen bool) {
	if !frozen && w.frozen && w.following {
		w.restart(now)
	}
	w.frozen = frozen
}

// Deadline is when this follower steals unless it hears a heartbeat
// first; zero when it may not steal at all (not following, hidden, frozen).
func (w *Watchdog) Deadline() time.Time {
	if !w.following || !w.visible || w.frozen {
		return time.Time{}
	}
	return w.since.Add(w.stallAfter + w.jitter)
}

// Tick reports whether to steal now. After a yes the watchdog stops
// following: the steal makes this election the leader, or fails and the
// election rejoins the queue (Follow again).
func (w *Watchdog) Tick(now time.Time) bool {
	d := w.Deadline()
	if d.IsZero() || now.Before(d) {
		return false
	}
	w.following = false
	w.stats.Steals++
	return true
}

// ParseHeartbeat validates the token of a received heartbeat (isNumber:
// it was a JavaScript number): an integer from 1 to 2^53-1, or it is not a
// heartbeat. Anything on the channel is untrusted.
func ParseHeartbeat(token float64, isNumber bool) (uint64, bool) {
	if !isNumber || token != token || token < 1 || token > maxToken || token != float64(uint64(token)) {
		return 0, false
	}
	return uint64(token), true
}

// maxToken is the largest token a heartbeat may carry: tokens travel as
// JavaScript numbers (wire.MaxToken).
const maxToken = 1<<53 - 1
