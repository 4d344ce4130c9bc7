//go:build js && wasm

package channel_test

import (
	"context"
	"fmt"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/channel"
)

// Two instances with the same name talk; a stale leader's message is
// dropped and counted.
func ExampleOpen() {
	leader, _ := channel.Open("tabfence:example:v1")
	defer leader.Close()
	follower, _ := channel.Open("tabfence:example:v1")
	defer follower.Close()
	got := make(chan channel.Message, 4)
	follower.Subscribe(func(m channel.Message) { got <- m })

	cur := channel.NewSequencer("doc:1", "tab-b", 5)
	old := channel.NewSequencer("doc:1", "tab-a", 4)
	leader.Send(cur, "delta", js.ValueOf("fresh"))
	leader.Send(old, "delta", js.ValueOf("stale"))
	leader.Send(cur, "delta", js.ValueOf("fresh again"))

	fmt.Println((<-got).Payload.String())
	fmt.Println((<-got).Payload.String())
	fmt.Println("stale dropped:", follower.Stats().DroppedBy(channel.StaleToken))
	// Output:
	// fresh
	// fresh again
	// stale dropped: 1
}

// Subscribe before loading, load, then replay.
func ExampleChannel_Replay() {
	leader, _ := channel.Open("tabfence:example-replay:v1")
	defer leader.Close()
	starting, _ := channel.Open("tabfence:example-replay:v1", channel.Buffered())
	defer starting.Close()
	got := make(chan channel.Message, 4)
	starting.Subscribe(func(m channel.Message) { got <- m })

	s := channel.NewSequencer("doc:1", "tab-a", 3)
	leader.Send(s, "delta", js.ValueOf(1))
	// ... the starting tab loads from IndexedDB meanwhile ...
	for starting.Stats().Received == 0 {
		time.Sleep(time.Millisecond)
	}
	starting.Replay()
	m := <-got
	fmt.Println(m.Seq, m.Payload.Int())
	// Output: 1 1
}

// Write, then announce: nothing is posted unless the write committed.
func ExampleChannel_Announce() {
	ch, _ := channel.Open("tabfence:example-announce:v1")
	defer ch.Close()
	s := channel.NewSequencer("doc:1", "tab-a", 1)
	failing := func(ctx context.Context) error { return fmt.Errorf("quota exceeded") }
	committed := func(ctx context.Context) error { return nil } // e.g. db.Apply(...)
	_, err := ch.Announce(context.Background(), s, failing, "saved", js.Undefined())
	fmt.Println("failed write:", err)
	e, _ := ch.Announce(context.Background(), s, committed, "saved", js.Undefined())
	fmt.Println("announced seq", e.Seq)
	// Output:
	// failed write: quota exceeded
	// announced seq 1
}

// A subscriber that only records the message runs straight from the
// message handler, with no goroutine handoff: the lowest latency.
func ExampleChannel_SubscribeNow() {
	leader, _ := channel.Open("tabfence:example-now:v1")
	defer leader.Close()
	follower, _ := channel.Open("tabfence:example-now:v1")
	defer follower.Close()
	got := make(chan channel.Message, 16) // buffered: fn must never block
	stop := follower.SubscribeNow(func(m channel.Message) {
		select {
		case got <- m:
		default: // full: a real app would count this and reload from storage
		}
	})
	defer stop()
	s := channel.NewSequencer("doc:1", "tab-a", 1)
	leader.Send(s, "delta", js.ValueOf("hello"))
	m := <-got
	fmt.Println(m.Kind, m.Token, m.Seq, m.Payload.String())
	// Output: delta 1 1 hello
}
