//go:build js && wasm

package channel

import (
	"syscall/js"
	"testing"
)

func benchEnvelope() js.Value {
	return obj(`{protocol: "tabfence", version: 1, id: "0123456789abcdef0123456789abcdef", kind: "ping",
		resource: "rtt-x-abc", owner: "owner-0123456789abcdef", token: 3, seq: 17, sentAt: Date.now(), payload: 1}`)
}

func BenchmarkDecode(b *testing.B) {
	v := benchEnvelope()
	l := DefaultLimits
	var hdrs hdrCache
	for i := 0; i < b.N; i++ {
		if _, why := decode(v, l, &hdrs); why != ReasonNone {
			b.Fatal(why)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	c, err := Open("tabfence:bench-encode")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s := NewSequencer("rtt-x-abc", "owner-0123456789abcdef", 3)
	for i := 0; i < b.N; i++ {
		c.encode(s.Next("ping", js.ValueOf(1)))
	}
}

// BenchmarkDispatch calls the channel's onmessage from a JavaScript loop
// with fresh envelopes, as BroadcastChannel does: decode, cursor, queue,
// delivery to one subscriber.
func BenchmarkDispatch(b *testing.B) {
	c, err := Open("tabfence:bench-dispatch")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	n := 0
	c.Subscribe(func(Message) { n++ })
	loop := js.Global().Call("eval", `((cb, n) => { for (let i = 1; i <= n; i++) cb({ data: {protocol: "tabfence", version: 1, id: "id" + i, kind: "ping",
		resource: "rtt-x-abc", owner: "owner-0123456789abcdef", token: 3, seq: i, sentAt: Date.now(), payload: 1} }); })`)
	b.ResetTimer()
	loop.Invoke(c.cb.Value, b.N)
	b.StopTimer()
	if n != b.N {
		b.Fatalf("delivered %d of %d", n, b.N)
	}
}
