package locks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBackoff(t *testing.T) {
	want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	for n, w := range want {
		assert.Equal(t, w, backoff(n), "backoff(%d)", n)
	}
	require.Equal(t, backoffMax, backoff(1000), "cap")
}

func TestMachineLeadAndResign(t *testing.T) {
	var m machine
	started, err := m.start()
	require.True(t, started)
	require.NoError(t, err)
	started, _ = m.start()
	require.False(t, started, "second start must not start again")
	a := m.next()
	require.Equal(t, actJoin, a.kind)
	require.False(t, a.steal)
	gen, ok := m.granted()
	require.True(t, ok)
	require.Equal(t, 1, gen)
	require.Equal(t, phaseAcquiring, m.phase)
	require.False(t, m.leading())
	lead, _ := m.allocated()
	require.True(t, lead, "must lead")
	require.True(t, m.leading(), "must lead")
	require.Equal(t, resignNow, m.resignReq(), "leader resigns now")
	m.ended(ReasonResigned)
	require.Equal(t, phaseJoining, m.phase, "resign rejoins at once")
	require.Equal(t, time.Duration(0), m.delay, "resign rejoins at once")
	require.Equal(t, actJoin, m.next().kind)
	gen, _ = m.granted()
	require.Equal(t, 2, gen, "generation counts leaderships")
}

func TestMachineResignWhileAcquiring(t *testing.T) {
	var m machine
	m.start()
	m.next()
	m.granted()
	require.Equal(t, resignLater, m.resignReq(), "acquiring: resign later")
	lead, cause := m.allocated()
	require.False(t, lead)
	require.ErrorIs(t, cause, ErrResigned)
	m.ended(ReasonResigned)
	// The flag does not leak into the next term.
	m.next()
	m.granted()
	lead, _ = m.allocated()
	require.True(t, lead, "next term leads")
	var idle machine
	require.Equal(t, resignNothing, idle.resignReq(), "idle resign is a no-op")
}

func TestMachineFailuresBackOff(t *testing.T) {
	var m machine
	m.start()
	for i := 1; i <= 3; i++ {
		a := m.next()
		if i == 1 && a.kind != actJoin {
			t.Fatalf("%+v", a)
		}
		if i > 1 {
			require.Equal(t, actWait, a.kind, "failure %d: %+v", i, a)
			require.Equal(t, backoff(i-1), a.delay, "failure %d: %+v", i, a)
			require.Equal(t, phaseBackoff, m.phase, "failure %d: %+v", i, a)
			if a = m.next(); a.kind != actJoin {
				t.Fatalf("after the wait it joins: %+v", a)
			}
		}
		m.granted()
		m.ended(ReasonError) // token allocation failed
	}
	require.Equal(t, 3, m.failures)
	m.next()
	m.next()
	m.granted()
	m.allocated()
	m.ended(ReasonStolen) // a term that ended normally resets
	require.Equal(t, 0, m.failures, "reset")
	require.Equal(t, time.Duration(0), m.delay, "reset")
	m.failed() // request error before any grant
	a := m.next()
	require.Equal(t, actWait, a.kind)
	require.Equal(t, backoffMin, a.delay)
	m.ended(ReasonFenced)
	require.NotEqual(t, time.Duration(0), m.delay, "fenced backs off")
}

func TestMachineSteal(t *testing.T) {
	var idle machine
	require.Equal(t, stealStart, idle.stealReq(), "idle steal starts")
	require.Equal(t, phaseJoining, idle.phase, "idle steal starts")
	a := idle.next()
	require.Equal(t, actJoin, a.kind)
	require.True(t, a.steal)
	require.False(t, idle.next().steal, "steal flag is used once")

	var m machine
	m.start()
	m.next()
	require.Equal(t, stealWithdraw, m.stealReq(), "waiting: withdraw")
	require.True(t, m.next().steal, "then steal")
	m.granted()
	require.Equal(t, stealWait, m.stealReq(), "acquiring: wait")
	m.allocated()
	require.Equal(t, stealLeading, m.stealReq(), "leading")
	m.ended(ReasonError)
	require.Equal(t, actWait, m.next().kind, "backoff")
	require.Equal(t, stealWake, m.stealReq(), "backoff: wake")
	a = m.next()
	require.Equal(t, actJoin, a.kind, "steal skips the backoff")
	require.True(t, a.steal, "steal skips the backoff")
	require.Equal(t, time.Duration(0), a.delay, "steal skips the backoff")
}

func TestMachineClose(t *testing.T) {
	var idle machine
	first, wasIdle := idle.close()
	require.True(t, first, "idle close")
	require.True(t, wasIdle, "idle close")
	_, err := idle.start()
	require.ErrorIs(t, err, ErrClosed, "start after close")

	var m machine
	m.start()
	m.next()
	first, wasIdle = m.close()
	require.True(t, first, "close")
	require.False(t, wasIdle, "close")
	first, _ = m.close()
	require.False(t, first, "idempotent")
	_, ok := m.granted()
	require.False(t, ok, "a closed election never takes the lock")
	require.Equal(t, actStop, m.next().kind, "stop")
	require.Equal(t, stealClosed, m.stealReq(), "closed")
	require.Equal(t, resignClosed, m.resignReq(), "closed")

	var l machine
	l.start()
	l.next()
	l.granted()
	l.close() // close while acquiring
	lead, cause := l.allocated()
	require.False(t, lead)
	require.ErrorIs(t, cause, ErrClosed)
	l.ended(ReasonClosed)
	l.failed()
	require.Equal(t, phaseClosed, l.phase, "closed is terminal")
}

func TestPhaseString(t *testing.T) {
	require.Equal(t, "leading", phaseLeading.String())
	require.Equal(t, "closed", phaseClosed.String())
}
