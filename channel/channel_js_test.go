//go:build js && wasm

package channel

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/jsglue"
)

var chSeq int

func chName(t *testing.T) string {
	chSeq++
	return "tabfence:test-" + t.Name() + ":v" + strconv.Itoa(chSeq)
}

func openCh(t *testing.T, name string, opts ...Option) *Channel {
	t.Helper()
	c, err := Open(name, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

type inbox struct {
	mu   sync.Mutex
	msgs []Message
}

func (b *inbox) add(m Message) { b.mu.Lock(); b.msgs = append(b.msgs, m); b.mu.Unlock() }
func (b *inbox) list() []Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Message(nil), b.msgs...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func obj(src string) js.Value { return js.Global().Call("eval", "("+src+")") }

func TestRoundTripAndNoSelfDelivery(t *testing.T) {
	name := chName(t)
	a, b := openCh(t, name), openCh(t, name)
	var got, self inbox
	b.Subscribe(got.add)
	a.Subscribe(self.add)
	s := NewSequencer("doc:1", "tab-a", 5)
	sent, err := a.Send(s, "delta", obj(`{n: 1, list: [1, "two", {three: 3}], when: new Date(0)}`))
	require.NoError(t, err)
	waitFor(t, "delivery", func() bool { return len(got.list()) == 1 })
	m := got.list()[0]
	if m.ID != sent.ID || m.Kind != "delta" || m.Resource != "doc:1" || m.Owner != "tab-a" || m.Token != 5 || m.Seq != 1 || m.SentAt != sent.SentAt || m.Gap {
		t.Fatalf("%+v", m)
	}
	if m.Payload.Get("list").Index(2).Get("three").Int() != 3 {
		t.Fatal("payload not cloned intact")
	}
	time.Sleep(20 * time.Millisecond)
	if len(self.list()) != 0 {
		t.Fatal("delivered to the sending instance")
	}
}

func TestStaleLeaderDroppedAndGapReported(t *testing.T) {
	name := chName(t)
	a, b := openCh(t, name), openCh(t, name)
	var got inbox
	b.Subscribe(got.add)
	old := NewSequencer("r", "tab-old", 4)
	cur := NewSequencer("r", "tab-new", 5)
	mustSend := func(s *Sequencer) Envelope {
		e, err := a.Send(s, "k", js.Undefined())
		require.NoError(t, err)
		return e
	}
	mustSend(old)
	mustSend(cur)
	mustSend(old) // stale: the old leader resumed
	replay := mustSend(cur)
	if err := a.Post(replay); err != nil { // same message again
		t.Fatal(err)
	}
	cur.Next("k", js.Undefined()) // seq 3 lost
	mustSend(cur)                 // seq 4: gap
	waitFor(t, "4 deliveries", func() bool { return b.Stats().Received == 6 })
	var seqs []string
	for _, m := range got.list() {
		seqs = append(seqs, strconv.FormatUint(m.Token, 10)+"/"+strconv.FormatUint(m.Seq, 10)+"/"+strconv.FormatBool(m.Gap))
	}
	want := "4/1/false 5/1/false 5/2/false 5/4/true"
	if s := joinSpace(seqs); s != want {
		t.Fatalf("got %s, want %s", s, want)
	}
	st := b.Stats()
	if st.DroppedBy(StaleToken) != 1 || st.DroppedBy(DuplicateID) != 1 || st.Gaps != 1 || st.Delivered != 4 {
		t.Fatalf("%+v", st)
	}
}

func joinSpace(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}

// TestHostileScriptPostsGarbage: any same-origin script can post anything.
func TestHostileScriptPostsGarbage(t *testing.T) {
	name := chName(t)
	b := openCh(t, name, WithLimits(Limits{MaxPayload: 1000}))
	var got inbox
	b.Subscribe(got.add)
	post := js.Global().Get("Function").New("name", `
const bc = new BroadcastChannel(name);
const ok = () => ({protocol: "tabfence", version: 1, id: "id-" + Math.random(), kind: "k", resource: "r", owner: "evil", token: 1, seq: 1, sentAt: Date.now()});
const nested = {}; let cur = nested; for (let i = 0; i < 500; i++) { cur.next = {i, s: "x".repeat(10)}; cur = cur.next; }
const posts = [
  // malformed: not objects / missing or wrong fields
  [null, "malformed"], [42, "malformed"], ["a string", "malformed"], [NaN, "malformed"], [undefined, "malformed"], [true, "malformed"],
  [{...ok(), token: -1}, "malformed"], [{...ok(), token: NaN}, "malformed"], [{...ok(), token: Infinity}, "malformed"],
  [{...ok(), token: "5"}, "malformed"], [{...ok(), token: 1.5}, "malformed"], [{...ok(), token: 2**53}, "malformed"],
  [{...ok(), token: 0}, "malformed"], [{...ok(), seq: 0}, "malformed"], [{...ok(), seq: -3}, "malformed"],
  [{...ok(), sentAt: "now"}, "malformed"], [{...ok(), id: 7}, "malformed"], [{...ok(), id: ""}, "malformed"],
  [{...ok(), owner: undefined}, "malformed"], [{...ok(), kind: null}, "malformed"], [{...ok(), resource: ["r"]}, "malformed"],
  [{...ok(), version: "1"}, "malformed"], [{...ok(), version: NaN}, "malformed"],
  // BigInts: syscall/js cannot type them; never a panic
  [5n, "malformed"], [{...ok(), token: 5n}, "malformed"], [{...ok(), id: 5n}, "malformed"], [{...ok(), version: 1n}, "malformed"],
  [{...ok(), protocol: 1n}, "foreign_protocol"],
  // wrapper objects and Dates clone, and JSON would read them as primitives
  [{...ok(), id: new String("x")}, "malformed"], [{...ok(), owner: new Date()}, "malformed"], [{...ok(), token: new Number(1)}, "malformed"],
  [{...ok(), version: new Number(1)}, "malformed"], [{...ok(), protocol: new String("tabfence")}, "foreign_protocol"],
  // foreign
  [{}, "foreign_protocol"], [[], "foreign_protocol"], [nested, "foreign_protocol"], [new Date(), "foreign_protocol"],
  [new Map([["protocol", "tabfence"]]), "foreign_protocol"], [{...ok(), protocol: "other"}, "foreign_protocol"],
  [{...ok(), protocol: "tabfence".repeat(100000)}, "foreign_protocol"], [new Uint8Array(8), "foreign_protocol"],
  [{type: "delta", payload: 1}, "foreign_protocol"],
  // other version
  [{...ok(), version: 2}, "version"], [{...ok(), version: 0}, "version"],
  // oversized
  [{...ok(), kind: "k".repeat(1e6)}, "oversized"], [{...ok(), id: "i".repeat(129)}, "oversized"],
  [{...ok(), resource: "r".repeat(201)}, "oversized"], [{...ok(), payload: "p".repeat(1001)}, "oversized"],
  [{...ok(), payload: new ArrayBuffer(5000)}, "oversized"], [{...ok(), payload: new Float64Array(1000)}, "oversized"],
];
const expect = {};
for (const [v, reason] of posts) { bc.postMessage(v); expect[reason] = (expect[reason] || 0) + 1; }
// Fine ones: a nested junk payload is opaque and allowed.
bc.postMessage({...ok(), payload: nested});
bc.postMessage({...ok(), seq: 2, id: "bigint", payload: 2n ** 70n}); // a BigInt payload is data
bc.postMessage({...ok(), seq: 3, id: "last", payload: "p".repeat(1000)});
bc.close();
return expect;`)
	expect := post.Invoke(name)
	waitFor(t, "the last valid message", func() bool {
		l := got.list()
		return len(l) > 0 && l[len(l)-1].ID == "last"
	})
	st := b.Stats()
	for _, r := range Reasons() {
		want := 0
		if v := expect.Get(r.String()); v.Type() == js.TypeNumber {
			want = v.Int()
		}
		if st.DroppedBy(r) != uint64(want) {
			t.Errorf("%s: dropped %d, want %d", r, st.DroppedBy(r), want)
		}
	}
	if len(got.list()) != 3 || st.Delivered != 3 {
		t.Fatalf("delivered %d", len(got.list()))
	}
	// The tab still works.
	a := openCh(t, name)
	if _, err := a.Send(NewSequencer("r", "good", 2), "k", js.Undefined()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a good message after the garbage", func() bool { return len(got.list()) == 4 })
}

func TestBufferDuringLoadThenReplay(t *testing.T) {
	name := chName(t)
	a := openCh(t, name)
	b := openCh(t, name, Buffered())
	var got inbox
	b.Subscribe(got.add)
	s := NewSequencer("r", "tab-a", 3)
	for i := 0; i < 3; i++ {
		if _, err := a.Send(s, "k", js.ValueOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Send(NewSequencer("r", "old", 2), "k", js.Undefined()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "buffered", func() bool { return b.Stats().Received == 4 })
	time.Sleep(10 * time.Millisecond)
	if len(got.list()) != 0 {
		t.Fatal("delivered during load")
	}
	// The load found state up to seq 1 already.
	b.Seed("r", 3, 1)
	b.Replay()
	waitFor(t, "replay", func() bool { return len(got.list()) == 2 })
	if l := got.list(); l[0].Seq != 2 || l[1].Seq != 3 || l[0].Payload.Int() != 1 {
		t.Fatalf("%+v", l)
	}
	st := b.Stats()
	if st.DroppedBy(StaleToken) != 1 || st.DroppedBy(DuplicateSeq) != 1 {
		t.Fatalf("%+v", st)
	}
	// Live afterwards; Buffer again works too.
	a.Send(s, "k", js.Undefined())
	waitFor(t, "live", func() bool { return len(got.list()) == 3 })
}

func TestAnnounceWritesThenPosts(t *testing.T) {
	name := chName(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := idb.Open(ctx, "announce-"+name, idb.WithSchema(idb.Schema{Steps: []idb.Step{{Version: 1, Upgrade: func(tx *idb.UpgradeTx) error {
		return tx.CreateStore("docs", idb.StoreOptions{})
	}}}}))
	require.NoError(t, err)
	defer db.Close()
	a, b := openCh(t, name), openCh(t, name)
	var got inbox
	b.Subscribe(got.add)
	s := NewSequencer("doc", "tab-a", 1)
	apply := func(opID, value string, fail bool) func(context.Context) error {
		return func(ctx context.Context) error {
			res, err := db.Apply(ctx, idb.Op{Resource: "doc", Token: s.Token(), OperationID: opID}, func(tx *idb.WriteTx) error {
				if err := tx.Put("docs", js.ValueOf("d"), js.ValueOf(value)); err != nil {
					return err
				}
				if fail {
					return errors.New("write failed")
				}
				return nil
			})
			if err == nil && res != idb.Accepted {
				err = errors.New(res.String())
			}
			return err
		}
	}
	if _, err := a.Announce(ctx, s, apply("op1", "v1", true), "saved", js.ValueOf("v1")); err == nil {
		t.Fatal("failed commit reported success")
	}
	e, err := a.Announce(ctx, s, apply("op2", "v2", false), "saved", js.ValueOf("v2"))
	require.NoError(t, err)
	if e.Seq != 1 {
		t.Fatalf("a failed commit used a sequence: %d", e.Seq)
	}
	waitFor(t, "announcement", func() bool { return len(got.list()) == 1 })
	m := got.list()[0]
	if m.Payload.String() != "v2" || m.Gap {
		t.Fatalf("%+v", m)
	}
	// The follower, told, finds at least that in storage.
	v, err := db.Get(ctx, "docs", js.ValueOf("d"))
	if err != nil || v.String() != "v2" {
		t.Fatal(v, err)
	}
	if st := b.Stats(); st.Received != 1 {
		t.Fatalf("the failed write was announced: %+v", st)
	}
}

func TestPostErrorsAndCloseReleases(t *testing.T) {
	base := jsglue.LiveCallbacks()
	name := chName(t)
	a, err := Open(name)
	require.NoError(t, err)
	if jsglue.LiveCallbacks() != base+1 {
		t.Fatal("one callback per channel")
	}
	s := NewSequencer("r", "o", 1)
	if _, err := a.Send(s, "k", obj(`{f: () => 1}`)); !errors.Is(err, jsglue.ErrDataClone) {
		t.Fatalf("want DataCloneError, got %v", err)
	}
	if _, err := a.Send(NewSequencer("r", "o", 0), "k", js.Undefined()); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	big := js.ValueOf(string(make([]byte, DefaultLimits.MaxPayload+1)))
	if _, err := a.Send(s, "k", big); !errors.Is(err, ErrInvalid) {
		t.Fatal(err)
	}
	a.Close()
	a.Close()
	if got := jsglue.LiveCallbacks(); got != base {
		t.Fatalf("callbacks %d, want %d", got, base)
	}
	if _, err := a.Send(s, "k", js.Undefined()); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
}

func TestSubscribePanicDoesNotKillDelivery(t *testing.T) {
	name := chName(t)
	a, b := openCh(t, name), openCh(t, name)
	var got inbox
	unsub := b.Subscribe(func(Message) { panic("subscriber bug") })
	b.Subscribe(got.add)
	s := NewSequencer("r", "o", 1)
	a.Send(s, "k", js.Undefined())
	waitFor(t, "first", func() bool { return len(got.list()) == 1 })
	unsub()
	a.Send(s, "k", js.Undefined())
	waitFor(t, "second", func() bool { return len(got.list()) == 2 })
}

func TestSubscribeNowInArrivalOrderBesideSubscribe(t *testing.T) {
	name := chName(t)
	a, b := openCh(t, name), openCh(t, name, Buffered())
	var now, later inbox
	b.SubscribeNow(func(Message) { panic("subscriber bug") }) // recovered; the others still get everything
	unsub := b.SubscribeNow(now.add)
	b.Subscribe(later.add)
	s := NewSequencer("r", "o", 1)
	for i := 0; i < 5; i++ {
		a.Send(s, "k", js.ValueOf(i))
	}
	waitFor(t, "buffered", func() bool { return b.Stats().Received == 5 })
	// Replay calls the non-blocking subscribers itself, before it returns.
	b.Replay()
	if n := len(now.list()); n != 5 {
		t.Fatalf("after Replay SubscribeNow holds %d messages, want 5", n)
	}
	for i := 5; i < 20; i++ {
		a.Send(s, "k", js.ValueOf(i))
	}
	waitFor(t, "20 each", func() bool { return len(now.list()) == 20 && len(later.list()) == 20 })
	for _, l := range [][]Message{now.list(), later.list()} {
		for i, m := range l {
			if m.Seq != uint64(i+1) || m.Payload.Int() != i || m.Gap {
				t.Fatalf("message %d: %+v", i, m)
			}
		}
	}
	unsub()
	a.Send(s, "k", js.ValueOf(20))
	waitFor(t, "21 later", func() bool { return len(later.list()) == 21 })
	if n := len(now.list()); n != 20 {
		t.Fatalf("unsubscribed SubscribeNow got %d messages", n)
	}
}

// The channel tests again, through the loader's fast path.
func TestFastPath(t *testing.T) { runChannelSuite(t, func(t *testing.T) { withFastPath(t) }) }

// runChannelSuite runs the channel tests again, each after setup (which
// installs a path of the loader's for the channels it opens).
func runChannelSuite(t *testing.T, setup func(*testing.T)) {
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"RoundTrip", TestRoundTripAndNoSelfDelivery}, {"StaleAndGap", TestStaleLeaderDroppedAndGapReported},
		{"Hostile", TestHostileScriptPostsGarbage}, {"Buffer", TestBufferDuringLoadThenReplay},
		{"Announce", TestAnnounceWritesThenPosts}, {"PostErrors", TestPostErrorsAndCloseReleases},
		{"SubscribePanic", TestSubscribePanicDoesNotKillDelivery}, {"SubscribeNow", TestSubscribeNowInArrivalOrderBesideSubscribe},
	} {
		t.Run(tc.name, func(t *testing.T) { setup(t); tc.f(t) })
	}
}

// A receiver on the fast path and one without it, on the same channel, see
// the same messages the same way: odd but valid strings and numbers, and
// garbage.
// With exports, the fast receiver's headers enter Go through the wasm
// export (see export_js.go) instead of its js.Func.
func TestFastPathDecodesLikeGo(t *testing.T) {
	t.Run("js.Func", func(t *testing.T) { testFastPathDecodesLikeGo(t, false) })
	t.Run("exports", func(t *testing.T) { testFastPathDecodesLikeGo(t, true) })
}

func testFastPathDecodesLikeGo(t *testing.T, exports bool) {
	name := chName(t)
	slow := openCh(t, name)
	func() {
		fast := withFastPath(t)
		if exports {
			fast.Call("attach", instExports(t))
			defer fast.Call("attach", nil)
		}
		fastCh := openCh(t, name)
		t.Cleanup(func() { fastCh.Close() })
		slowGot, fastGot := &inbox{}, &inbox{}
		slow.SubscribeNow(slowGot.add)
		fastCh.SubscribeNow(fastGot.add)
		post := js.Global().Get("Function").New("name", `
const bc = new BroadcastChannel(name);
let seq = 0;
const env = (o) => ({protocol: "tabfence", version: 1, id: "id" + seq, kind: "k", resource: "r", owner: "o", token: 5, seq: ++seq, sentAt: 1, ...o});
const posts = [
  env({}), env({id: "q\"b\\s/\n\t\u0001"}), env({kind: "𝄞 ü ✓ \u2028"}), env({owner: "\ud800 lone"}), env({resource: "\udc00\ud800"}),
  env({sentAt: -0}), env({sentAt: 2**53 - 1, payload: {nested: [1, "x"]}}), env({payload: 7n}), env({token: 6, seq: 1e0, id: "e"}),
  env({token: 1e21}), env({seq: 0.5}), env({sentAt: -1}), env({token: NaN}), env({id: "i".repeat(129)}), env({kind: "𝄞".repeat(33)}),
  env({id: "\u0001".repeat(128), resource: "\u0001".repeat(200)}), env({id: "é".repeat(128), owner: "\ud800".repeat(128), resource: "✓".repeat(200)}),
  env({owner: new String("o")}), env({version: 2}), env({protocol: "x"}), [1], null, "tabfence", env({payload: "p".repeat(2e6)}),
  env({protocol: new String("tabfence")}), env({version: "1"}), env({version: new Number(1)}), env({token: new Number(5)}),
  env({id: new Date(0)}), env({kind: 5}), env({seq: true}), env({resource: ["r"]}), {}, {protocol: "tabfence"}, {protocol: "tabfence", version: 1},
  env({id: "i".repeat(3000)}), env({protocol: "x", id: "i".repeat(3000)}), env({version: 2, owner: "o".repeat(3000)}),
  env({id: "last", seq: 99, payload: undefined}),
];
for (const p of posts) bc.postMessage(p);
bc.close();
return posts.length;`)
		n := post.Invoke(name).Int()
		waitFor(t, "all messages at both", func() bool {
			return slow.Stats().Received == uint64(n) && fastCh.Stats().Received == uint64(n)
		})
		if s, f := slow.Stats(), fastCh.Stats(); s != f {
			t.Errorf("stats differ:\n slow %+v\n fast %+v", s, f)
		}
		sl, fl := slowGot.list(), fastGot.list()
		if len(sl) != len(fl) || len(sl) < 8 {
			t.Fatalf("delivered %d without the fast path, %d with it", len(sl), len(fl))
		}
		for i := range sl {
			s, f := sl[i], fl[i]
			if s.Envelope.String() != f.Envelope.String() || s.ID != f.ID || s.Owner != f.Owner || s.SentAt != f.SentAt || s.Gap != f.Gap ||
				!jsSame(s.Payload, f.Payload) {
				t.Errorf("message %d: slow %+v, fast %+v", i, s, f)
			}
		}
	}()
}

// jsSame compares two received payloads by their JSON (BigInts by String).
func jsSame(a, b js.Value) bool {
	str := js.Global().Call("eval", `((v) => typeof v === "bigint" ? v + "n" : JSON.stringify(v) + typeof v)`)
	return str.Invoke(a).String() == str.Invoke(b).String()
}

// Go's posts through the fast path, with headers that fit its scratch
// buffer and ones that do not (escapes, non-ASCII), reach a receiver
// without the fast path exactly as sent.
func TestFastPathPostsLikeGo(t *testing.T) {
	name := chName(t)
	slow := openCh(t, name)
	var got inbox
	slow.SubscribeNow(got.add)
	withFastPath(t)
	fastCh := openCh(t, name)
	var sent []Envelope
	for i, res := range []string{"doc", strings.Repeat("\x01", 200), strings.Repeat("✓", 200), "r\u2028\"\\"} {
		s := NewSequencer(res, strings.Repeat("é", 128), uint64(i+1))
		e, err := fastCh.Send(s, strings.Repeat("k\n", 32), obj(`{n: 1}`))
		require.NoError(t, err)
		sent = append(sent, e)
	}
	// An ID that is not 32 hex digits goes out as JSON (the hook post), one that
	// is as four words (post2).
	for _, id := range []string{"custom-id", "0123456789ABCDEF0123456789ABCDEF", "00000000000000000000000000000000"} {
		e := NewSequencer("doc", "o", 9).Next("k", obj(`{n: 1}`))
		e.ID, e.Seq = id, uint64(len(sent)+1)
		require.NoError(t, fastCh.Post(e))
		sent = append(sent, e)
	}
	waitFor(t, "delivery", func() bool { return len(got.list()) == len(sent) })
	for i, m := range got.list() {
		if m.Envelope.String() != sent[i].String() || m.ID != sent[i].ID || m.Owner != sent[i].Owner || m.SentAt != sent[i].SentAt || m.Payload.Get("n").Int() != 1 {
			t.Errorf("message %d: sent %+v, got %+v", i, sent[i], m)
		}
	}
}
