package browser

import (
	"strconv"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// This file is the native, browser-free half of the Runtime (runtime_js.go):
// the frozen-owner detection state machine, the progress mark it watches,
// and small pure helpers. Everything here runs on a virtual clock in tests.

// Channel message kinds of a Runtime. All are hints: the queue in the Store
// is the truth, and the flush lock deduplicates the work they trigger.
const (
	kindOutboxChanged = "OUTBOX_CHANGED" // an enqueue committed: flush
	kindStatusChanged = "STATUS_CHANGED" // the projection changed: re-read it
	kindStatusAsk     = "status?"        // a waiting tab asks the flush owner
	kindStatusAnswer  = "status!"        // the flush owner is alive (and announces takeovers)
)

// watchAction is what the watchdog tells its tab to do.
type watchAction int

const (
	watchNone  watchAction = iota
	watchAsk               // post "status?" to the flush owner
	watchSteal             // no answer in time: steal the lock and flush
)

func (a watchAction) String() string {
	switch a {
	case watchAsk:
		return "ask"
	case watchSteal:
		return "steal"
	}
	return "none"
}

// WatchConfig tunes the watchdog. Zero fields take the defaults.
type WatchConfig struct {
	// StallAfter is how long due work may see no progress before the tab
	// asks the owner for its status (default 1 s).
	StallAfter time.Duration
	// StatusTimeout is how long the owner has to answer before the tab
	// steals the lock (default 1.5 s).
	StatusTimeout time.Duration
	// HungAfter: an owner that answers but reports no progress of its own
	// for longer than this is hung (a request that never returns) and is
	// stolen from too (default 60 s).
	HungAfter time.Duration
}

func (c WatchConfig) withDefaults() WatchConfig {
	if c.StallAfter <= 0 {
		c.StallAfter = time.Second
	}
	if c.StatusTimeout <= 0 {
		c.StatusTimeout = 1500 * time.Millisecond
	}
	if c.HungAfter <= 0 {
		c.HungAfter = time.Minute
	}
	return c
}

// watchdog detects a flush owner that is alive but useless (a frozen or hung
// tab keeps its Web Lock, so the lock alone never hands the queue over). It
// is a pure state machine: feed it what the tab observes, act on what it
// returns, and call Tick at NextWake.
//
// A tab that is not the owner and sees due work (pending or in-flight
// records) arms it. If the progress mark does not change for StallAfter, it
// asks (watchAsk); an answer from a live owner re-arms the stall timer; no
// answer within StatusTimeout -> watchSteal. Any progress, the tab becoming
// owner, or the work going away disarms it.
type watchdog struct {
	cfg        WatchConfig
	armed      bool
	mark       string
	progressAt time.Time
	ackedAt    time.Time // the latest Projection.LastAckAt seen
	asking     bool
	askedAt    time.Time
}

// newWatchdog returns a disarmed watchdog.
func newWatchdog(cfg WatchConfig) *watchdog { return &watchdog{cfg: cfg.withDefaults()} }

// Config returns the effective configuration.
func (w *watchdog) Config() WatchConfig { return w.cfg }

// Observe feeds one look at the queue: mark is the progress mark of the
// projection (progressMark), ackedAt its LastAckAt, oldest its
// OldestPendingAt, due whether there is work the owner should be doing,
// owner whether this tab holds the flush lock.
//
// The first look that finds due work times the stall from when the owner
// has owed it: the later of its last ack and the oldest unsettled record's
// creation (never from the future). A tab that first looks after the owner
// froze — its first attempts may all have returned before they could try
// the lock — asks as soon as a tab that had watched all along; work enqueued
// after an idle spell is timed from its enqueue, not from the old ack.
//
// A tab reads the queue some time after the owner changed it (status reads
// are debounced, and a hidden tab's timers are throttled), so a changed mark
// says the owner made progress, not when. When the change brings a newer
// ack, the stall is timed from that ack instead of from the look: an owner
// frozen right after its last ack is asked, and stolen from, as soon as if
// the tab had seen the ack at once, and an ask already outstanding when such
// older news arrives still stands.
func (w *watchdog) Observe(now time.Time, mark string, ackedAt, oldest time.Time, due, owner bool) watchAction {
	newAck := ackedAt.After(w.ackedAt)
	if newAck {
		w.ackedAt = ackedAt
	}
	if owner || !due {
		w.disarm(mark)
		return watchNone
	}
	if !w.armed {
		w.armed, w.mark, w.progressAt, w.asking = true, mark, now, false
		if oldest.After(ackedAt) {
			ackedAt = oldest
		}
		if !ackedAt.IsZero() && ackedAt.Before(now) {
			w.progressAt = ackedAt
		}
		return w.Tick(now)
	}
	if mark != w.mark {
		at := now
		if newAck && ackedAt.Before(now) {
			at = ackedAt
		}
		w.mark = mark
		if at.After(w.progressAt) {
			w.progressAt = at
		}
		if !w.asking || !at.Before(w.askedAt) {
			w.asking = false
			return watchNone
		}
	}
	return w.Tick(now)
}

// Tick advances time. It returns watchAsk once per stall and watchSteal
// when the owner did not answer in time (the watchdog then restarts its
// stall timer, so a failed steal is retried later rather than in a loop).
func (w *watchdog) Tick(now time.Time) watchAction {
	if !w.armed {
		return watchNone
	}
	if w.asking {
		if now.Sub(w.askedAt) >= w.cfg.StatusTimeout {
			w.asking, w.progressAt = false, now
			return watchSteal
		}
		return watchNone
	}
	if now.Sub(w.progressAt) >= w.cfg.StallAfter {
		w.asking, w.askedAt = true, now
		return watchAsk
	}
	return watchNone
}

// Suspect arms a disarmed watchdog as if the progress mark had last changed
// at since: the tab cannot even read the queue (a frozen owner's open
// IndexedDB transaction blocks every read), so it cannot see progress nor
// due work, but knows another tab holds the lock. An armed watchdog is left
// as it is.
func (w *watchdog) Suspect(now, since time.Time) watchAction {
	if !w.armed {
		w.armed, w.progressAt, w.asking = true, since, false
	}
	return w.Tick(now)
}

// Answer feeds an owner's "status!": stalled is how long the owner itself
// has been waiting on one step (0 if unknown). A live owner re-arms the stall
// timer; one stalled beyond HungAfter is stolen from at once.
func (w *watchdog) Answer(now time.Time, stalled time.Duration) watchAction {
	if !w.armed {
		return watchNone
	}
	if stalled > w.cfg.HungAfter {
		w.asking, w.progressAt = false, now
		return watchSteal
	}
	w.asking, w.progressAt = false, now
	return watchNone
}

// Asking reports whether a "status?" is outstanding.
func (w *watchdog) Asking() bool { return w.asking }

// Armed reports whether the watchdog is watching an owner.
func (w *watchdog) Armed() bool { return w.armed }

// NextWake returns when Tick should run next (zero: not armed).
func (w *watchdog) NextWake() time.Time {
	switch {
	case !w.armed:
		return time.Time{}
	case w.asking:
		return w.askedAt.Add(w.cfg.StatusTimeout)
	}
	return w.progressAt.Add(w.cfg.StallAfter)
}

func (w *watchdog) disarm(mark string) {
	w.armed, w.asking, w.mark = false, false, mark
}

// progressMark summarises what a flush owner changes as it works: settled
// and failed counts, what is in flight, and the last flush time. An enqueue
// only adds pending records and is not progress.
func progressMark(p outbox.Projection) string {
	b := make([]byte, 0, 64)
	for _, n := range []int{p.Acked, p.DeadLetter, p.Terminal, p.Conflict, p.Failed, p.Sending} {
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, ',')
	}
	b = strconv.AppendInt(b, p.LastFlushAt.UnixNano(), 10)
	return string(b)
}

// hasDueWork reports whether the projection shows work a flush owner should
// be doing now: pending or in-flight records. Records waiting out a backoff
// are not counted (their timer is the owner's business).
func hasDueWork(p outbox.Projection) bool {
	return p.Pending+p.Sending > 0 && !p.Paused && !outbox.SessionHeldNow(p.Meta)
}

// parseFenceToken reads the token of a POST /fence/{resource} answer,
// {"resource": "...", "token": N}, without a JSON decoder (the wasm build
// stays free of encoding/json). ok is false if there is no positive integer
// token member.
func parseFenceToken(body []byte) (uint64, bool) {
	const key = `"token"`
	for i := 0; i+len(key) <= len(body); i++ {
		if string(body[i:i+len(key)]) != key {
			continue
		}
		j := i + len(key)
		for j < len(body) && (body[j] == ' ' || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
			j++
		}
		if j >= len(body) || body[j] != ':' {
			continue
		}
		j++
		for j < len(body) && (body[j] == ' ' || body[j] == '\t' || body[j] == '\n' || body[j] == '\r') {
			j++
		}
		k := j
		for k < len(body) && body[k] >= '0' && body[k] <= '9' {
			k++
		}
		// Summed by hand, not with strconv.ParseUint: its *NumError links
		// strconv.Quote and its Unicode tables into the download. Digits
		// only grow the sum, so stopping above 2^53-1 also rules out
		// overflow.
		var t uint64
		for ; j < k; j++ {
			if t = t*10 + uint64(body[j]-'0'); t > 1<<53-1 {
				return 0, false
			}
		}
		if t == 0 {
			return 0, false
		}
		return t, true
	}
	return 0, false
}

// nextDue returns the earliest NextAttemptAt of the waiting records among
// recs (zero if none): when the owner's timer should fire.
func nextDue(recs []queue.Record) time.Time {
	var t time.Time
	for i := range recs {
		r := &recs[i]
		if !r.Status.Waiting() {
			continue
		}
		if t.IsZero() || r.NextAttemptAt.Before(t) {
			t = r.NextAttemptAt
		}
	}
	return t
}
