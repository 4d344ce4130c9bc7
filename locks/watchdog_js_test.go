//go:build js && wasm

package locks

import (
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue"
)

// The browser half of the watchdog, in Chromium: what a leader posts on the
// heartbeat channel (its token and a timestamp, nothing else, every
// HeartbeatEvery), and what a follower does with what anyone else posts
// there (anything on a BroadcastChannel is untrusted). Freezing a leader
// needs a second tab: e2e/watchdog_test.go.
func TestBeaconPostsOnlyTokenAndTimeAndDropsGarbage(t *testing.T) {
	baseCB := jsglue.LiveCallbacks()
	scope, f := uniqueScope(t), &countingFencer{next: 40}
	a := newProbe(t, "a", scope, 1, func(c *Config) { c.Fencer = f; c.StallAfter = MinStallAfter }).start()
	la := a.waitLeader()
	b := newProbe(t, "b", scope, 1, func(c *Config) { c.Fencer = f; c.StallAfter = MinStallAfter }).start()
	b.waitFollower()

	// A raw listener of the heartbeat channel, as any same-origin script.
	js.Global().Set("__hb", js.Global().Get("Array").New())
	raw := js.Global().Call("eval", `((name) => { const c = new BroadcastChannel(name);
		c.onmessage = (e) => __hb.push({ keys: Object.keys(e.data).sort().join(","), token: e.data.token, at: e.data.at, got: Date.now() });
		return c; })`).Invoke(HeartbeatChannel(a.e.LockName()))
	defer raw.Call("close")
	deadline := time.Now().Add(wait)
	for js.Global().Get("__hb").Length() < 5 {
		if time.Now().After(deadline) {
			t.Fatalf("%d heartbeats heard", js.Global().Get("__hb").Length())
		}
		time.Sleep(50 * time.Millisecond)
	}
	hb := js.Global().Get("__hb")
	for i := 0; i < hb.Length(); i++ {
		m := hb.Index(i)
		require.Equal(t, "at,token", m.Get("keys").String(), "heartbeat %d: keys %s token %v, want only at and token %d", i, m.Get("keys"), m.Get("token"), la.Token)
		require.Equal(t, la.Token, uint64(m.Get("token").Float()), "heartbeat %d: keys %s token %v, want only at and token %d", i, m.Get("keys"), m.Get("token"), la.Token)
		if i > 0 {
			gap := m.Get("got").Float() - hb.Index(i-1).Get("got").Float()
			assert.GreaterOrEqual(t, gap, float64(HeartbeatEvery.Milliseconds())*0.8, "heartbeat gap %.0f ms, want about %v", gap, HeartbeatEvery)
			assert.LessOrEqual(t, gap, float64(MinStallAfter.Milliseconds())/2, "heartbeat gap %.0f ms, want about %v", gap, HeartbeatEvery)
		}
	}

	// Garbage is counted and dropped; an older token is stale; neither
	// makes the follower steal or stops it hearing the real leader.
	before := b.e.WatchStats()
	for _, src := range []string{`"hi"`, `null`, `({})`, `({ token: "5" })`, `({ token: 0 })`, `({ token: 1.5 })`, `({ token: 2 ** 53 })`, `({ token: 1 })`} {
		raw.Call("postMessage", js.Global().Call("eval", "("+src+")"))
	}
	deadline = time.Now().Add(wait)
	for {
		s := b.e.WatchStats()
		if s.Malformed-before.Malformed == 7 && s.Stale-before.Stale == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, before %+v: want 7 malformed and 1 stale more", s, before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.True(t, a.e.IsLeader(), "garbage on the heartbeat channel changed the leader")
	require.False(t, b.e.IsLeader(), "garbage on the heartbeat channel changed the leader")
	a.e.Close()
	b.waitLeader()
	b.e.Close()
	<-a.e.Done()
	<-b.e.Done()
	deadline = time.Now().Add(wait)
	for jsglue.LiveCallbacks() != baseCB {
		if time.Now().After(deadline) {
			t.Fatalf("live callbacks %d, want %d", jsglue.LiveCallbacks(), baseCB)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
