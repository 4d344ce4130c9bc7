package locks

import (
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stretchr/testify/assert"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// noJitter draws 0; maxRand the largest jitter.
func noJitter(int64) int64  { return 0 }
func maxRand(n int64) int64 { return n - 1 }
func visibleFollower(stall time.Duration, rnd func(int64) int64) *Watchdog {
	w := NewWatchdog(stall, rnd)
	w.SetVisible(t0, true)
	w.Follow(t0)
	return w
}

func TestWatchdogStealsAfterSilence(t *testing.T) {
	w := visibleFollower(3*time.Second, noJitter)
	require.False(t, w.Tick(at(2999)), "stole before stallAfter")
	require.True(t, w.Tick(at(3000)), "no steal after stallAfter of silence")
	// One steal per silence: the election leads or rejoins (Follow).
	require.False(t, w.Tick(at(9000)), "stole twice without following again")
	require.True(t, w.Deadline().IsZero(), "stole twice without following again")
	w.Follow(at(9000))
	require.True(t, w.Tick(at(12000)), "after rejoining: %+v", w.Stats())
	require.Equal(t, uint64(2), w.Stats().Steals, "after rejoining: %+v", w.Stats())
}

func TestWatchdogHeartbeatsKeepTheLeader(t *testing.T) {
	w := visibleFollower(3*time.Second, noJitter)
	// A hidden leader's heartbeats: about a second apart, two when a
	// throttled wake-up is missed. Over a minute, never a steal.
	ms := 0
	for i := 0; ms < 60000; i++ {
		gap := 1000
		if i%7 == 3 {
			gap = 2000
		}
		ms += gap
		require.False(t, w.Tick(at(ms)), "stole at %d ms after a %d ms gap", ms, gap)
		w.Heard(at(ms), 5)
	}
	require.NotEqual(t, uint64(0), w.Stats().Heard, "%+v", w.Stats())
	require.Equal(t, uint64(0), w.Stats().Steals, "%+v", w.Stats())
	got := w.Deadline()
	require.True(t, got.Equal(at(ms+3000)), "deadline %v, want 3 s after the last heartbeat", got.Sub(t0))
}

func TestWatchdogOlderTokenIsNotALiveLeader(t *testing.T) {
	w := visibleFollower(3*time.Second, noJitter)
	w.Heard(at(100), 7)
	// The deposed leader (token 6) resumes and beats once more: it proves
	// nothing about the current leader.
	w.Heard(at(2000), 6)
	require.True(t, w.Tick(at(3100)), "a stale token restarted the stall timer")
	s := w.Stats()
	require.Equal(t, uint64(1), s.Stale)
	require.Equal(t, uint64(1), s.Heard)
	// This tab's own leadership counts as heard: after it is stolen from,
	// an older token still proves nothing.
	w.Led(9)
	w.Follow(at(4000))
	w.Heard(at(5000), 8)
	require.True(t, w.Tick(at(7000)), "a token below this tab's own restarted the timer")
}

func TestWatchdogOnlyAVisibleAwakeFollowerSteals(t *testing.T) {
	w := NewWatchdog(3*time.Second, noJitter)
	w.Follow(t0)
	// Hidden (the default until told): never, however long the silence.
	require.False(t, w.Tick(at(600000)), "a hidden follower stole")
	require.True(t, w.Deadline().IsZero(), "a hidden follower stole")
	// Becoming visible starts the silence then, not at the last heartbeat.
	w.SetVisible(at(600000), true)
	require.False(t, w.Tick(at(602999)), "stole on silence from before the tab was visible")
	require.True(t, w.Tick(at(603000)), "visible follower never stole")

	w.Follow(at(700000))
	w.SetFrozen(at(700500), true)
	require.False(t, w.Tick(at(800000)), "a frozen follower stole")
	w.SetFrozen(at(800000), false)
	require.False(t, w.Tick(at(802999)), "after resume: the silence must start at the resume")
	require.True(t, w.Tick(at(803000)), "after resume: the silence must start at the resume")

	// Not following (leading, acquiring, closed): never.
	w.Stop()
	require.False(t, w.Tick(at(900000)), "stole while not following")
	// Hidden again: the deadline goes away.
	w.Follow(at(900000))
	w.SetVisible(at(900001), false)
	require.True(t, w.Deadline().IsZero(), "hidden follower has a deadline")
}

func TestWatchdogJitterIsBounded(t *testing.T) {
	for _, c := range []struct {
		stall, want time.Duration
	}{{3 * time.Second, 250 * time.Millisecond}, {5 * time.Second, 250 * time.Millisecond}, {time.Hour, 250 * time.Millisecond}} {
		w := visibleFollower(c.stall, maxRand)
		got := w.Deadline().Sub(t0) - c.stall
		assert.GreaterOrEqual(t, got, time.Duration(0), "stall %v: jitter %v, want in [0, %v)", c.stall, got, c.want)
		assert.Less(t, got, c.want, "stall %v: jitter %v, want in [0, %v)", c.stall, got, c.want)
		lo := visibleFollower(c.stall, noJitter).Deadline().Sub(t0)
		assert.Equal(t, c.stall, lo, "stall %v: no-jitter deadline %v", c.stall, lo)
	}
	// A fresh draw at every restart: two followers that heard the same
	// heartbeat steal at different times.
	draws := []int64{10, 200}
	i := 0
	w := visibleFollower(3*time.Second, func(n int64) int64 { d := draws[i%2] * int64(time.Millisecond); i++; return d % n })
	first := w.Deadline()
	w.Heard(at(1000), 1)
	require.NotEqual(t, first.Sub(t0), w.Deadline().Sub(at(1000)), "jitter not redrawn")
}

func TestValidStallAfter(t *testing.T) {
	for _, c := range []struct {
		d      time.Duration
		fenced bool
		ok     bool
	}{
		{0, false, true}, {0, true, true},
		{MinStallAfter, true, true}, {DefaultStallAfter, true, true}, {MaxStallAfter, true, true},
		{MinStallAfter - time.Millisecond, true, false}, {MaxStallAfter + time.Millisecond, true, false},
		{-time.Second, true, false},
		{DefaultStallAfter, false, false}, // unfenced: a steal would not be safe
	} {
		err := ValidStallAfter(c.d, c.fenced)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalidOptions)) {
			t.Errorf("ValidStallAfter(%v, fenced %v) = %v", c.d, c.fenced, err)
		}
	}
	want := "from " + strconv.Itoa(int(MinStallAfter/time.Millisecond)) + " to " + strconv.Itoa(int(MaxStallAfter/time.Millisecond)) +
		" (" + strconv.Itoa(int(DefaultStallAfter/time.Millisecond)) + " by default)"
	require.Contains(t, errStallAfterRange, want, "%q does not say %q", errStallAfterRange, want)
	// Through NewElection.
	_, err := NewElection(Config{Scope: "s", Protocol: 1, StallAfter: DefaultStallAfter})
	require.ErrorIs(t, err, ErrInvalidOptions, "unfenced watchdog election")
	_, err = NewElection(Config{Scope: "s", Protocol: 1, StallAfter: time.Second, Fencer: &countingFencer{}})
	require.ErrorIs(t, err, ErrInvalidOptions, "stallAfter below the minimum")
	e, err := NewElection(Config{Scope: "s", Protocol: 1, StallAfter: DefaultStallAfter, Fencer: &countingFencer{}})
	require.NoError(t, err, "%v", e)
	require.Equal(t, DefaultStallAfter, e.StallAfter(), "%v", e)
}

func TestParseHeartbeat(t *testing.T) {
	for _, c := range []struct {
		v     float64
		num   bool
		token uint64
		ok    bool
	}{
		{1, true, 1, true}, {42, true, 42, true}, {1<<53 - 1, true, 1<<53 - 1, true},
		{0, true, 0, false}, {-1, true, 0, false}, {1.5, true, 0, false}, {1 << 53, true, 0, false},
		{math.NaN(), true, 0, false}, {math.Inf(1), true, 0, false}, {7, false, 0, false},
	} {
		tok, ok := ParseHeartbeat(c.v, c.num)
		assert.Equal(t, c.token, tok, "ParseHeartbeat(%v, %v)", c.v, c.num)
		assert.Equal(t, c.ok, ok, "ParseHeartbeat(%v, %v)", c.v, c.num)
	}
	require.Equal(t, "tabfence:w:v3#heartbeat", HeartbeatChannel("tabfence:w:v3"))
}
