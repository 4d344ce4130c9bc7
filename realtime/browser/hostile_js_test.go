//go:build js && wasm

package browser_test

import (
	"context"
	"strconv"
	"syscall/js"
	"testing"
	"time"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/realtime/browser"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// Hostile channel posts (any same-origin script can make them) are
// counted and dropped: BigInt fields panic nothing, a huge string is not
// taken, a delta whose changes break the replica's rule is not applied by
// followers, and a flood of new mutation ids is capped.
func TestConnHostilePostsBounded(t *testing.T) {
	f := newFixture(t)
	conns := f.open(2)
	waitFor(t, "ready", func() bool { return allReady(conns) })
	l, fs := leaderOf(conns)
	if err := l.SetOffline(context.Background(), true); err != nil { // nothing reaches the server
		t.Fatal(err)
	}
	waitFor(t, "offline", func() bool { return fs[0].Status().State == browser.StateOffline })
	ch, err := channel.Open(l.Names().Lock)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	eval := func(src string) js.Value { return js.Global().Call("eval", "("+src+")") }
	seq := channel.NewSequencer("somebody", "x", 1)
	send := func(s *channel.Sequencer, kind string, p js.Value) {
		t.Helper()
		if _, err := ch.Send(s, kind, p); err != nil {
			t.Fatal(err)
		}
	}
	bad := fs[0].Stats().BadMessages
	send(seq, "rt.mutation", eval(`{id: 1n, op: "put", entity: "e", payload: new Uint8Array(1), madeAt: 1n}`))
	send(seq, "rt.settled", eval(`{id: 1n, ack: {status: 1n}}`))
	send(seq, "rt.offline", eval(`{offline: 1n}`))
	send(seq, "rt.settled", eval(`{id: "x".repeat(8 << 20), ack: {status: 200}}`))
	waitFor(t, "BigInt and huge posts counted", func() bool { return fs[0].Stats().BadMessages >= bad+4 })

	// 20,000 new ids: at most MaxPending are listed, the rest counted.
	for i := 0; i < 20000; i++ {
		p := eval(`{op: "put", entity: "e", payload: new Uint8Array(1), madeAt: Date.now()}`)
		p.Set("id", "flood-"+strconv.Itoa(i))
		send(seq, "rt.mutation", p)
	}
	deadline := time.Now().Add(60 * time.Second)
	for fs[0].Stats().DroppedMutations+uint64(fs[0].Status().Pending) < 20000 {
		if time.Now().After(deadline) {
			t.Fatalf("the flood: %+v, %d pending", fs[0].Stats(), fs[0].Status().Pending)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := fs[0].Status().Pending; n > browser.MaxPending {
		t.Fatalf("%d pending listed", n)
	}

	// A delta announced on the leaders' resource whose changes write the
	// runtime's own store: the follower does not apply it.
	v := fs[0].Status().Version
	forged := channel.NewSequencer(l.Names().Resource, "x", 1<<40)
	var heard []string
	fs[0].OnDelta(func(d rt.Delta) { heard = append(heard, string(d.Changes)) })
	p := eval(`{changes: '[{"store":"tf_rt_meta","key":"version","value":99}]'}`)
	p.Set("version", float64(v+1))
	p.Set("prev", float64(v))
	send(forged, "rt.delta", p)
	waitFor(t, "the bad changes counted", func() bool { return fs[0].Stats().BadChanges >= 1 })
	if s := fs[0].Status(); s.Version != v || len(heard) != 0 {
		t.Fatalf("a follower applied bad changes: %+v %v", s, heard)
	}
}
