package channel_test

import (
	"fmt"

	"github.com/tabfence/tabfence/channel"
)

// A follower's cursor drops what a stale leader says and flags gaps.
func ExampleCursor() {
	c := channel.NewCursor(0)
	fmt.Println(c.Offer(10, 1, "m1")) // leader 10
	fmt.Println(c.Offer(10, 2, "m2"))
	fmt.Println(c.Offer(9, 7, "x")) // old leader resumed
	fmt.Println(c.Offer(10, 2, "m2"))
	fmt.Println(c.Offer(10, 5, "m5")) // 3 and 4 missed: reload
	fmt.Println(c.Offer(11, 1, "n1")) // new leader
	// Output:
	// accept gap=false
	// accept gap=false
	// drop:stale_token
	// drop:duplicate_id
	// accept gap=true
	// accept gap=false
}

// A guard keeps a late worker or fetch result from reaching the UI.
func ExampleGuard() {
	g := channel.NewGuard()
	g.Advance("search", 1) // query "abc" starts
	g.Advance("search", 2) // query "abcd" starts
	fmt.Println(g.IsCurrent("search", 2), g.IsStale("search", 1))
	// Output: true true
}

// A sequencer stamps one leader context's messages.
func ExampleSequencer() {
	var payload channel.Payload
	s := channel.NewSequencer("doc:1", "tab-a", 7)
	a, b := s.Next("delta", payload), s.Next("delta", payload)
	fmt.Println(a.Token, a.Seq, b.Seq, a.ID != b.ID)
	// Output: 7 1 2 true
}
