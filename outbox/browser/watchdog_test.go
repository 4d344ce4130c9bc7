package browser

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestWatchdogStealsFromSilentOwner(t *testing.T) {
	w := newWatchdog(WatchConfig{})
	now := t0
	p := outbox.Projection{Pending: 10}
	mark := progressMark(p)
	require.Equal(t, watchNone, w.Observe(now, mark, time.Time{}, time.Time{}, hasDueWork(p), false))
	require.True(t, w.Armed())
	require.Equal(t, now.Add(time.Second), w.NextWake())
	require.Equal(t, watchNone, w.Tick(now.Add(999*time.Millisecond)))
	require.Equal(t, watchAsk, w.Tick(now.Add(time.Second)))
	require.True(t, w.Asking())
	require.Equal(t, now.Add(2500*time.Millisecond), w.NextWake())
	require.Equal(t, watchNone, w.Tick(now.Add(2499*time.Millisecond)))
	require.Equal(t, watchSteal, w.Tick(now.Add(2500*time.Millisecond)))
	// after a steal the stall timer restarts: no steal loop
	require.False(t, w.Asking())
	require.Equal(t, watchNone, w.Tick(now.Add(2600*time.Millisecond)))
}

func TestWatchdogLiveOwnerAnswers(t *testing.T) {
	w := newWatchdog(WatchConfig{StallAfter: 500 * time.Millisecond, StatusTimeout: time.Second})
	p := outbox.Projection{Sending: 3}
	w.Observe(t0, progressMark(p), time.Time{}, time.Time{}, true, false)
	require.Equal(t, watchAsk, w.Tick(t0.Add(500*time.Millisecond)))
	require.Equal(t, watchNone, w.Answer(t0.Add(600*time.Millisecond), 0))
	require.False(t, w.Asking())
	require.Equal(t, watchNone, w.Tick(t0.Add(1000*time.Millisecond))) // stall timer restarted at the answer
	require.Equal(t, watchAsk, w.Tick(t0.Add(1100*time.Millisecond)))
	// an answer saying the owner itself is stuck on one step for too long: steal
	require.Equal(t, watchSteal, w.Answer(t0.Add(1700*time.Millisecond), 2*time.Minute))
}

func TestWatchdogProgressAndOwnershipDisarm(t *testing.T) {
	w := newWatchdog(WatchConfig{})
	p := outbox.Projection{Pending: 5}
	w.Observe(t0, progressMark(p), time.Time{}, time.Time{}, true, false)
	require.Equal(t, watchAsk, w.Tick(t0.Add(time.Second)))
	// progress (an ack) while asking: re-armed from scratch, no steal
	p.Pending, p.Acked = 4, 1
	require.Equal(t, watchNone, w.Observe(t0.Add(1200*time.Millisecond), progressMark(p), time.Time{}, time.Time{}, true, false))
	require.False(t, w.Asking())
	require.Equal(t, watchNone, w.Tick(t0.Add(2100*time.Millisecond)))
	// an enqueue is not progress
	p.Pending = 9
	require.Equal(t, watchAsk, w.Observe(t0.Add(2200*time.Millisecond), progressMark(p), time.Time{}, time.Time{}, true, false))
	// no due work: disarmed
	require.Equal(t, watchNone, w.Observe(t0.Add(3*time.Second), progressMark(outbox.Projection{Acked: 10}), time.Time{}, time.Time{}, false, false))
	require.False(t, w.Armed())
	require.Equal(t, time.Time{}, w.NextWake())
	require.Equal(t, watchNone, w.Tick(t0.Add(time.Hour)))
	// the tab is the owner: disarmed
	w.Observe(t0, progressMark(p), time.Time{}, time.Time{}, true, false)
	require.Equal(t, watchNone, w.Observe(t0.Add(time.Hour), progressMark(p), time.Time{}, time.Time{}, true, true))
	require.False(t, w.Armed())
	// paused queue: no due work
	require.False(t, hasDueWork(outbox.Projection{Pending: 1, Meta: outbox.Meta{Paused: true}}))
}

func TestFenceHelpers(t *testing.T) {
	tok, ok := parseFenceToken([]byte(`{"resource":"outbox:n:a","token":42}`))
	require.True(t, ok)
	require.Equal(t, uint64(42), tok)
	tok, ok = parseFenceToken([]byte("{\"token\" : 7 }"))
	require.True(t, ok)
	require.Equal(t, uint64(7), tok)
	for _, bad := range []string{`{}`, `{"token":0}`, `{"token":"3"}`, `{"token":9007199254740992}`, `{"token":-1}`} {
		_, ok := parseFenceToken([]byte(bad))
		require.False(t, ok, bad)
	}
	recs := []queue.Record{
		{Status: queue.StatusAcked, NextAttemptAt: t0},
		{Status: queue.StatusFailed, NextAttemptAt: t0.Add(3 * time.Second)},
		{Status: queue.StatusPending, NextAttemptAt: t0.Add(time.Second)},
	}
	require.Equal(t, t0.Add(time.Second), nextDue(recs))
	require.True(t, nextDue(nil).IsZero())
}

// TestParseFenceTokenEdges pins what strconv.ParseUint used to decide:
// leading zeros are digits, 2^53-1 is the largest token, and numbers past
// it, even past uint64, are rejected rather than wrapped.
func TestParseFenceTokenEdges(t *testing.T) {
	for body, want := range map[string]uint64{
		`{"token":007}`:              7,
		`{"token":9007199254740991}`: 9007199254740991,
		`{"token":1,"x":2}`:          1,
	} {
		tok, ok := parseFenceToken([]byte(body))
		require.True(t, ok, body)
		require.Equal(t, want, tok, body)
	}
	for _, bad := range []string{`{"token":}`, `{"token":00}`, `{"token":18446744073709551616}`, `{"token":99999999999999999999999999}`} {
		_, ok := parseFenceToken([]byte(bad))
		require.False(t, ok, bad)
	}
}

func TestWatchdogSuspectsBlockedReads(t *testing.T) {
	w := newWatchdog(WatchConfig{})
	// a read outstanding since t0: asked at t0+1s, stolen at t0+2.5s
	require.Equal(t, watchNone, w.Suspect(t0.Add(500*time.Millisecond), t0))
	require.Equal(t, watchAsk, w.Suspect(t0.Add(time.Second), t0))
	require.Equal(t, watchNone, w.Suspect(t0.Add(2*time.Second), t0))
	require.Equal(t, watchSteal, w.Tick(t0.Add(2500*time.Millisecond)))
	// an armed watchdog keeps its own progress time
	w = newWatchdog(WatchConfig{})
	w.Observe(t0, "m", time.Time{}, time.Time{}, true, false)
	require.Equal(t, watchNone, w.Suspect(t0.Add(900*time.Millisecond), t0.Add(-time.Hour)))
}

// A tab sees the owner's last ack late (debounced status reads, throttled
// timers in a hidden tab): the stall is timed from the ack, and an ask that
// was already out when the old news came in still stands.
func TestWatchdogTimesStallFromTheAck(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// armed: a watchdog that saw 10 pending at 0 ms; with asked, it has
	// asked at 1000 ms. It returns the projection after one ack.
	armed := func(asked bool) (*watchdog, outbox.Projection) {
		w := newWatchdog(WatchConfig{})
		p := outbox.Projection{Pending: 10}
		w.Observe(at(0), progressMark(p), time.Time{}, time.Time{}, true, false)
		if asked {
			require.Equal(t, watchAsk, w.Tick(at(1000)))
		}
		p.Pending, p.Acked = 9, 1
		return w, p
	}
	// The ack happened at 900 ms, before the ask; seen at 1800 ms.
	w, p := armed(true)
	require.Equal(t, watchNone, w.Observe(at(1800), progressMark(p), at(900), time.Time{}, true, false))
	require.True(t, w.Asking())
	require.Equal(t, at(2500), w.NextWake())
	require.Equal(t, watchSteal, w.Tick(at(2500)))

	// An ack after the ask is progress: the question is dropped and the
	// stall timed from the ack.
	w, p = armed(true)
	require.Equal(t, watchNone, w.Observe(at(1500), progressMark(p), at(1200), time.Time{}, true, false))
	require.False(t, w.Asking())
	require.Equal(t, at(2200), w.NextWake())

	// No ask out: an ack seen late moves the stall start to the ack, not
	// to the look.
	w, p = armed(false)
	require.Equal(t, watchNone, w.Observe(at(900), progressMark(p), at(100), time.Time{}, true, false))
	require.Equal(t, at(1100), w.NextWake()) // not 1900: the ack was at 100
	require.Equal(t, watchNone, w.Tick(at(1099)))
	require.Equal(t, watchAsk, w.Tick(at(1100)))

	// A change without a newer ack (another kind of progress), or an ack
	// time ahead of this tab's clock, counts from the look.
	w = newWatchdog(WatchConfig{})
	p = outbox.Projection{Pending: 10, Acked: 1}
	w.Observe(at(0), progressMark(p), at(-50), time.Time{}, true, false)
	p.Sending = 2
	w.Observe(at(700), progressMark(p), at(-50), time.Time{}, true, false)
	require.Equal(t, at(1700), w.NextWake())
	p.Acked = 2
	w.Observe(at(800), progressMark(p), at(5000), time.Time{}, true, false)
	require.Equal(t, at(1800), w.NextWake())
}

// The first look at due work times the stall from when the owner has owed
// it: the later of its last ack and the oldest unsettled record's creation.
func TestWatchdogFirstLookTimesFromWhatIsOwed(t *testing.T) {
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p := outbox.Projection{Pending: 9, Acked: 1}
	// The owner acked at 600 ms, with the rest queued since 0, and froze;
	// this tab's first look is at 1700 ms: it asks at once, and steals
	// 1.5 s later.
	w := newWatchdog(WatchConfig{})
	require.Equal(t, watchAsk, w.Observe(at(1700), progressMark(p), at(600), at(0), true, false))
	require.Equal(t, at(3200), w.NextWake())
	require.Equal(t, watchSteal, w.Tick(at(3200)))

	// Work enqueued at 4990 ms after an idle spell (last ack at 100 ms) is
	// timed from its enqueue.
	w = newWatchdog(WatchConfig{})
	require.Equal(t, watchNone, w.Observe(at(5000), progressMark(p), at(100), at(4990), true, false))
	require.Equal(t, at(5990), w.NextWake())

	// Nothing ever acked: owed since the oldest record.
	w = newWatchdog(WatchConfig{})
	require.Equal(t, watchAsk, w.Observe(at(5000), progressMark(outbox.Projection{Pending: 3}), time.Time{}, at(1000), true, false))

	// Times ahead of this tab's clock count from the look.
	w = newWatchdog(WatchConfig{})
	require.Equal(t, watchNone, w.Observe(at(5000), progressMark(p), at(6000), at(5500), true, false))
	require.Equal(t, at(6000), w.NextWake())

	// Nothing due, or this tab the owner: not armed, whatever the times.
	w = newWatchdog(WatchConfig{})
	require.Equal(t, watchNone, w.Observe(at(5000), progressMark(p), at(100), at(0), false, false))
	require.Equal(t, watchNone, w.Observe(at(5000), progressMark(p), at(100), at(0), true, true))
	require.False(t, w.Armed())
}

// A held user's pending records are no due work: other tabs' watchdogs do
// not steal the lock (and fence again) for them in a loop.
func TestSessionHeldIsNoDueWork(t *testing.T) {
	held := outbox.Meta{Session: outbox.Session{UserID: "alice", AuthGeneration: 3}, SessionHeld: "alice"}
	require.False(t, hasDueWork(outbox.Projection{Pending: 2, Meta: held}))
	held.Session.UserID = "bob" // another user's session: bob's work is due
	require.True(t, hasDueWork(outbox.Projection{Pending: 2, Meta: held}))
}
