package realtime_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/realtime"
	"github.com/tabfence/tabfence/wire"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func cfg() realtime.Config {
	return realtime.Config{PingEvery: 30 * time.Second, PongTimeout: 10 * time.Second,
		Backoff: &outbox.Backoff{Base: time.Second, Cap: time.Minute, Rand: rand.New(rand.NewPCG(1, 2))}}
}

func sends(acts []realtime.Action) []rt.Message {
	var out []rt.Message
	for _, a := range acts {
		if s, ok := a.(realtime.Send); ok {
			out = append(out, s.Msg)
		}
	}
	return out
}

func has[T realtime.Action](acts []realtime.Action) (T, bool) {
	for _, a := range acts {
		if v, ok := a.(T); ok {
			return v, true
		}
	}
	var zero T
	return zero, false
}

// connect brings l from Start to Ready at now and returns the actions of
// the ready.
func connect(t *testing.T, l *realtime.Leader, now time.Time, serverVersion uint64) []realtime.Action {
	t.Helper()
	var dial realtime.Dial
	if l.State() == realtime.Offline || l.State() == realtime.Unauthorized {
		d, ok := has[realtime.Dial](l.Tick(now))
		if !ok {
			d, ok = has[realtime.Dial](l.Online(now))
		}
		require.True(t, ok, "a dial")
		dial = d
	} else {
		d, ok := has[realtime.Dial](l.Start(now))
		require.True(t, ok)
		dial = d
	}
	hello := sends(l.Dialed(now, dial.Gen, nil))
	require.Equal(t, []rt.Message{rt.Hello{Protocol: rt.Protocol, Version: l.Version()}}, hello)
	acts := l.Received(now, dial.Gen, rt.Ready{Version: serverVersion})
	require.Equal(t, realtime.Ready, l.State())
	return acts
}

func mut(id string) rt.Mutation { return rt.Mutation{ID: id, Op: "create", Entity: "note"} }

func TestReadyResendsEveryPendingMutationInOrder(t *testing.T) {
	p := realtime.NewPending()
	p.Add(mut("a"), t0)
	p.Add(mut("b"), t0)
	l := realtime.NewLeader(cfg(), 0, p)
	_, acts := l.Mutate(t0, mut("c"))
	require.Empty(t, acts, "not sent before ready")
	require.Equal(t, []rt.Message{mut("a"), mut("b"), mut("c")}, sends(connect(t, l, t0, 0)))
	_, acts = l.Mutate(t0, mut("d"))
	require.Equal(t, []rt.Message{mut("d")}, sends(acts), "sent at once when ready")
}

func TestPingAndPongDeadline(t *testing.T) {
	c := cfg()
	c.PingEvery, c.PongTimeout = 5*time.Second, 2*time.Second
	l := realtime.NewLeader(c, 0, nil)
	connect(t, l, t0, 0)
	gen := l.Gen()
	require.Equal(t, t0.Add(5*time.Second), l.Deadline(), "the next ping, as configured")
	require.Empty(t, l.Tick(t0.Add(4*time.Second)))
	ping := sends(l.Tick(t0.Add(5 * time.Second)))
	require.Equal(t, []rt.Message{rt.Ping{Nonce: 1}}, ping)
	l.Received(t0.Add(6*time.Second), gen, rt.Pong{Nonce: 1})
	require.Empty(t, l.Tick(t0.Add(7*time.Second)), "answered in time")
	require.Equal(t, []rt.Message{rt.Ping{Nonce: 2}}, sends(l.Tick(t0.Add(10*time.Second))))
	acts := l.Tick(t0.Add(12 * time.Second))
	cl, ok := has[realtime.CloseSocket](acts)
	require.True(t, ok, "no pong within PongTimeout: the socket is replaced")
	require.Equal(t, gen, cl.Gen)
	require.Equal(t, realtime.Offline, l.State())
	require.WithinDuration(t, t0.Add(12*time.Second), l.Deadline(), time.Second, "redial within the first backoff")
	require.Empty(t, l.Received(t0.Add(12*time.Second), gen, rt.Pong{Nonce: 2}), "the old socket no longer counts")
}

func TestReconnectBackoffHasFullJitter(t *testing.T) {
	l := realtime.NewLeader(cfg(), 0, nil)
	now := t0
	d, _ := has[realtime.Dial](l.Start(now))
	var waits []time.Duration
	below := 0
	for i := 1; i <= 8; i++ {
		l.Dialed(now, d.Gen, errors.New("refused"))
		require.Equal(t, realtime.Offline, l.State())
		w := l.Deadline().Sub(now)
		ceil := (&outbox.Backoff{Base: time.Second, Cap: time.Minute}).Ceiling(i)
		require.GreaterOrEqual(t, w, time.Duration(0))
		require.LessOrEqual(t, w, ceil, "attempt %d", i)
		waits = append(waits, w)
		if w < ceil {
			below++
		}
		now = l.Deadline()
		var ok bool
		d, ok = has[realtime.Dial](l.Tick(now))
		require.True(t, ok)
	}
	require.GreaterOrEqual(t, below, 6, "delays are drawn below their ceiling (full jitter), not the ceiling itself: %v", waits)
	hello := sends(l.Dialed(now, d.Gen, nil))
	require.Len(t, hello, 1)
	l.Received(now, d.Gen, rt.Ready{})
	l.Closed(now, d.Gen, -1)
	require.LessOrEqual(t, l.Deadline().Sub(now), time.Second, "a ready resets the backoff")
}

func TestOnlineAndVisibleReconnectAtOnce(t *testing.T) {
	for _, ev := range []string{"online", "visible"} {
		l := realtime.NewLeader(cfg(), 0, nil)
		now := t0
		d, _ := has[realtime.Dial](l.Start(now))
		for i := 0; i < 6; i++ { // a long backoff
			l.Dialed(now, d.Gen, errors.New("offline"))
			now = l.Deadline()
			d, _ = has[realtime.Dial](l.Tick(now))
		}
		l.Dialed(now, d.Gen, errors.New("offline"))
		var acts []realtime.Action
		if ev == "online" {
			acts = l.Online(now)
		} else {
			acts = l.Visible(now)
		}
		_, ok := has[realtime.Dial](acts)
		require.True(t, ok, "%s dials at once", ev)
	}
	l := realtime.NewLeader(cfg(), 0, nil)
	connect(t, l, t0, 0)
	require.Equal(t, []rt.Message{rt.Ping{Nonce: 1}}, sends(l.Visible(t0.Add(time.Second))), "a ready leader checks its socket")
}

func TestUnauthorizedRetriesOnlyWhenAsked(t *testing.T) {
	l := realtime.NewLeader(cfg(), 0, nil)
	d, _ := has[realtime.Dial](l.Start(t0))
	l.Dialed(t0, d.Gen, errors.Join(realtime.ErrUnauthorized, errors.New("401")))
	require.Equal(t, realtime.Unauthorized, l.State())
	require.True(t, l.Deadline().IsZero(), "no timer: it does not retry by itself")
	require.Empty(t, l.Online(t0))
	require.Empty(t, l.Visible(t0))
	_, ok := has[realtime.Dial](l.Retry(t0))
	require.True(t, ok, "a new tab's status? makes it try again")

	connect2 := realtime.NewLeader(cfg(), 0, nil)
	connect(t, connect2, t0, 0)
	connect2.Closed(t0, connect2.Gen(), rt.CloseUnauthorized)
	require.Equal(t, realtime.Unauthorized, connect2.State(), "the server ended the session")

	c := cfg()
	c.User = "alice"
	other := realtime.NewLeader(c, 0, nil)
	d, _ = has[realtime.Dial](other.Start(t0))
	require.Equal(t, []rt.Message{rt.Hello{Protocol: rt.Protocol, User: "alice"}}, sends(other.Dialed(t0, d.Gen, nil)))
	other.Closed(t0, d.Gen, rt.CloseSession)
	require.Equal(t, realtime.Unauthorized, other.State(), "credentials of another user: wait until asked")
}

func TestLeaderDeltasInOrderAndGapReconnects(t *testing.T) {
	l := realtime.NewLeader(cfg(), 3, nil)
	connect(t, l, t0, 5)
	gen := l.Gen()
	dv, ok := has[realtime.Deliver](l.Received(t0, gen, rt.Delta{Version: 4, Prev: 3}))
	require.True(t, ok)
	require.Equal(t, uint64(4), dv.Delta.Version)
	require.Empty(t, l.Received(t0, gen, rt.Delta{Version: 4, Prev: 3}), "a duplicate is not delivered twice")
	acts := l.Received(t0, gen, rt.Delta{Version: 7, Prev: 6})
	_, closed := has[realtime.CloseSocket](acts)
	_, delivered := has[realtime.Deliver](acts)
	require.True(t, closed, "a gap replaces the socket")
	require.False(t, delivered)
	require.Equal(t, t0, l.Deadline(), "at once")
	d, ok := has[realtime.Dial](l.Tick(t0))
	require.True(t, ok)
	require.Equal(t, []rt.Message{rt.Hello{Protocol: rt.Protocol, Version: 4}}, sends(l.Dialed(t0, d.Gen, nil)), "asking from the version reached")
	r, ok := has[realtime.ResetReplica](l.Received(t0, d.Gen, rt.Ready{Version: 9, Reset: true}))
	require.True(t, ok, "a server that lost the deltas has the replica reloaded")
	require.Equal(t, uint64(9), r.Version)
}

// A follower's mutation settles on the ack of whichever leader sends it:
// here the first leader vanished before an answer and the next one,
// restored from the stored pending list, resends it after ready.
func TestSettleByIDAcrossLeaderChange(t *testing.T) {
	follower := realtime.NewPending()
	done := follower.Add(mut("m1"), t0)

	first := realtime.NewLeader(cfg(), 0, nil)
	connect(t, first, t0, 0)
	_, acts := first.Mutate(t0, mut("m1"))
	require.Len(t, sends(acts), 1) // sent; the leader's tab closes before the answer

	stored := realtime.NewPending()
	stored.Add(mut("m1"), t0)
	next := realtime.NewLeader(cfg(), 0, stored)
	require.Equal(t, []rt.Message{mut("m1")}, sends(connect(t, next, t0.Add(time.Second), 0)))
	ack := rt.Ack{ID: "m1", Status: 201, Replayed: true}
	s, ok := has[realtime.Settled](next.Received(t0, next.Gen(), ack))
	require.True(t, ok)
	require.Zero(t, next.Pending().Len())

	require.True(t, follower.Settle(s.ID, s.Outcome), "the announcement settles the follower's own")
	select {
	case o := <-done:
		require.Equal(t, &ack, o.Ack)
	default:
		t.Fatal("the follower's promise did not settle")
	}
	require.False(t, follower.Settle(s.ID, s.Outcome), "once")
}

func TestRetryableRejectIsResentFinalOneSettles(t *testing.T) {
	l := realtime.NewLeader(cfg(), 0, nil)
	connect(t, l, t0, 0)
	ch, _ := l.Mutate(t0, mut("m1"))
	busy := rt.Reject{ID: "m1", Retry: true, Problem: rt.Problem{Type: wire.ProblemInFlight, Status: 409}}
	require.Empty(t, l.Received(t0, l.Gen(), busy))
	require.Equal(t, 1, l.Pending().Len(), "kept")
	at := l.Deadline()
	require.LessOrEqual(t, at.Sub(t0), time.Second)
	require.Equal(t, []rt.Message{mut("m1")}, sends(l.Tick(at)), "resent after its backoff")
	final := rt.Reject{ID: "m1", Problem: rt.Problem{Type: wire.ProblemStaleToken, Status: 409, Highest: 4}}
	_, ok := has[realtime.Settled](l.Received(at, l.Gen(), final))
	require.True(t, ok)
	o := <-ch
	require.Equal(t, &final, o.Reject)
	assert.Zero(t, l.Pending().Len())
}

func TestPendingAge(t *testing.T) {
	p := realtime.NewPending()
	assert.Zero(t, p.OldestAge(t0))
	p.Add(mut("a"), t0)
	p.Add(mut("b"), t0.Add(time.Second))
	assert.Equal(t, 5*time.Second, p.OldestAge(t0.Add(5*time.Second)))
	p.Settle("a", realtime.Outcome{Ack: &rt.Ack{ID: "a", Status: 200}})
	assert.Equal(t, 4*time.Second, p.OldestAge(t0.Add(5*time.Second)))
}

// A server that does not speak the client's protocol (4426) will not start
// to by being retried: the leader waits in Outdated, with no timer, until
// asked (a reload or a new tab's status?), whatever the page's events.
func TestUnsupportedProtocolWaitsOutdated(t *testing.T) {
	for name, refuse := range map[string]func(l *realtime.Leader, gen uint64) []realtime.Action{
		"error then close": func(l *realtime.Leader, gen uint64) []realtime.Action {
			acts := l.Received(t0, gen, rt.Error{Problem: rt.Problem{Type: "protocol-unsupported", Status: 426}})
			return append(acts, l.Closed(t0, gen, rt.CloseProtocol)...)
		},
		"close alone": func(l *realtime.Leader, gen uint64) []realtime.Action {
			return l.Closed(t0, gen, rt.CloseProtocol)
		},
	} {
		l := realtime.NewLeader(cfg(), 0, nil)
		d, _ := has[realtime.Dial](l.Start(t0))
		l.Dialed(t0, d.Gen, nil)
		acts := refuse(l, d.Gen)
		require.Equal(t, realtime.Outdated, l.State(), name)
		require.Equal(t, "outdated", l.State().String())
		sc, ok := has[realtime.StateChanged](acts)
		require.True(t, ok, name)
		require.Equal(t, realtime.Outdated, sc.State, "every tab can show it")
		require.True(t, l.Deadline().IsZero(), "%s: no timer, no backoff", name)
		for i := 1; i <= 10; i++ {
			require.Empty(t, l.Tick(t0.Add(time.Duration(i)*time.Hour)), name)
		}
		require.Empty(t, l.Online(t0), name)
		require.Empty(t, l.Visible(t0), name)
		_, acts = l.Mutate(t0, mut("m"))
		require.Empty(t, acts, "%s: nothing is sent", name)
		_, ok = has[realtime.Dial](l.Retry(t0.Add(time.Hour)))
		require.True(t, ok, "%s: asked, it tries again (the server may have been upgraded)", name)
	}
}
