package locks

import (
	"errors"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	for n, w := range want {
		if got := backoff(n); got != w {
			t.Errorf("backoff(%d) = %v want %v", n, got, w)
		}
	}
	if backoff(1000) != backoffMax {
		t.Fatal("cap")
	}
}

func TestMachineLeadAndResign(t *testing.T) {
	var m machine
	if started, err := m.start(); !started || err != nil {
		t.Fatal(started, err)
	}
	if started, _ := m.start(); started {
		t.Fatal("second start must not start again")
	}
	if a := m.next(); a.kind != actJoin || a.steal {
		t.Fatalf("%+v", a)
	}
	gen, ok := m.granted()
	if !ok || gen != 1 || m.phase != phaseAcquiring || m.leading() {
		t.Fatal(gen, ok, m.phase)
	}
	if lead, _ := m.allocated(); !lead || !m.leading() {
		t.Fatal("must lead")
	}
	if m.resignReq() != resignNow {
		t.Fatal("leader resigns now")
	}
	m.ended(ReasonResigned)
	if m.phase != phaseJoining || m.delay != 0 {
		t.Fatal("resign rejoins at once", m.phase, m.delay)
	}
	if a := m.next(); a.kind != actJoin {
		t.Fatalf("%+v", a)
	}
	if gen, _ := m.granted(); gen != 2 {
		t.Fatal("generation counts leaderships", gen)
	}
}

func TestMachineResignWhileAcquiring(t *testing.T) {
	var m machine
	m.start()
	m.next()
	m.granted()
	if m.resignReq() != resignLater {
		t.Fatal("acquiring: resign later")
	}
	lead, cause := m.allocated()
	if lead || !errors.Is(cause, ErrResigned) {
		t.Fatal(lead, cause)
	}
	m.ended(ReasonResigned)
	// The flag does not leak into the next term.
	m.next()
	m.granted()
	if lead, _ := m.allocated(); !lead {
		t.Fatal("next term leads")
	}
	var idle machine
	if idle.resignReq() != resignNothing {
		t.Fatal("idle resign is a no-op")
	}
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
			if a.kind != actWait || a.delay != backoff(i-1) || m.phase != phaseBackoff {
				t.Fatalf("failure %d: %+v %v", i, a, m.phase)
			}
			if a = m.next(); a.kind != actJoin {
				t.Fatalf("after the wait it joins: %+v", a)
			}
		}
		m.granted()
		m.ended(ReasonError) // token allocation failed
	}
	if m.failures != 3 {
		t.Fatal(m.failures)
	}
	m.next()
	m.next()
	m.granted()
	m.allocated()
	m.ended(ReasonStolen) // a term that ended normally resets
	if m.failures != 0 || m.delay != 0 {
		t.Fatal("reset", m.failures, m.delay)
	}
	m.failed() // request error before any grant
	if a := m.next(); a.kind != actWait || a.delay != backoffMin {
		t.Fatalf("%+v", a)
	}
	m.ended(ReasonFenced)
	if m.delay == 0 {
		t.Fatal("fenced backs off")
	}
}

func TestMachineSteal(t *testing.T) {
	var idle machine
	if idle.stealReq() != stealStart || idle.phase != phaseJoining {
		t.Fatal("idle steal starts")
	}
	if a := idle.next(); a.kind != actJoin || !a.steal {
		t.Fatalf("%+v", a)
	}
	if a := idle.next(); a.steal {
		t.Fatal("steal flag is used once")
	}

	var m machine
	m.start()
	m.next()
	if m.stealReq() != stealWithdraw {
		t.Fatal("waiting: withdraw")
	}
	if a := m.next(); !a.steal {
		t.Fatal("then steal")
	}
	m.granted()
	if m.stealReq() != stealWait {
		t.Fatal("acquiring: wait")
	}
	m.allocated()
	if m.stealReq() != stealLeading {
		t.Fatal("leading")
	}
	m.ended(ReasonError)
	if a := m.next(); a.kind != actWait {
		t.Fatal("backoff")
	}
	if m.stealReq() != stealWake {
		t.Fatal("backoff: wake")
	}
	if a := m.next(); a.kind != actJoin || !a.steal || a.delay != 0 {
		t.Fatalf("steal skips the backoff: %+v", a)
	}
}

func TestMachineClose(t *testing.T) {
	var idle machine
	if first, wasIdle := idle.close(); !first || !wasIdle {
		t.Fatal("idle close")
	}
	if _, err := idle.start(); !errors.Is(err, ErrClosed) {
		t.Fatal("start after close")
	}

	var m machine
	m.start()
	m.next()
	if first, wasIdle := m.close(); !first || wasIdle {
		t.Fatal("close")
	}
	if first, _ := m.close(); first {
		t.Fatal("idempotent")
	}
	if _, ok := m.granted(); ok {
		t.Fatal("a closed election never takes the lock")
	}
	if a := m.next(); a.kind != actStop {
		t.Fatal("stop")
	}
	if m.stealReq() != stealClosed || m.resignReq() != resignClosed {
		t.Fatal("closed")
	}

	var l machine
	l.start()
	l.next()
	l.granted()
	l.close() // close while acquiring
	if lead, cause := l.allocated(); lead || !errors.Is(cause, ErrClosed) {
		t.Fatal(lead, cause)
	}
	l.ended(ReasonClosed)
	l.failed()
	if l.phase != phaseClosed {
		t.Fatal("closed is terminal")
	}
}

func TestPhaseString(t *testing.T) {
	if phaseLeading.String() != "leading" || phaseClosed.String() != "closed" {
		t.Fatal()
	}
}
