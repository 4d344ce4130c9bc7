package channel

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func env(resource string, token, seq uint64, id string) Envelope {
	return Envelope{Protocol: Protocol, Version: Version, ID: id, Kind: "delta", Resource: resource,
		Owner: "tab-a", Token: token, Seq: seq, SentAt: 1}
}

func TestCursorRules(t *testing.T) {
	type step struct {
		token, seq uint64
		id         string
		want       string
	}
	steps := []step{
		{10, 3, "a", "accept gap=false"},   // first message a fresh cursor sees: no gap
		{10, 4, "b", "accept gap=false"},   // next in sequence
		{10, 4, "c", "drop:duplicate_seq"}, // same seq, other id
		{10, 2, "d", "drop:duplicate_seq"}, // late lower seq (section 22)
		{10, 4, "b", "drop:duplicate_id"},  // exact replay
		{10, 7, "e", "accept gap=true"},    // jumped 4 -> 7
		{9, 100, "f", "drop:stale_token"},  // old leader, any seq
		{11, 1, "g", "accept gap=false"},   // new leader, sequence restarts
		{11, 2, "h", "accept gap=false"},
		{12, 3, "i", "accept gap=true"}, // new token whose first seq > 1
		{11, 3, "j", "drop:stale_token"},
		{12, 4, "e", "drop:duplicate_id"}, // IDs dedupe across tokens
		{12, 4, "k", "accept gap=false"},
	}
	c := NewCursor(0)
	for i, s := range steps {
		require.Equal(t, s.want, c.Offer(s.token, s.seq, s.id).String(), "step %d (%d,%d,%s)", i, s.token, s.seq, s.id)
	}
	requirePosition(t, c, 12, 4)
}

// The reference's section 2 and 11: drop lower, same token is not rejected
// globally, higher advances.
func TestCursorReferenceSection11(t *testing.T) {
	c := NewCursor(0)
	c.Offer(42, 1, "x")
	v := c.Offer(41, 1, "y")
	require.False(t, v.Accept, v)
	require.Equal(t, StaleToken, v.Reason)
	require.True(t, c.Offer(42, 2, "z").Accept)
	v = c.Offer(43, 1, "w")
	require.True(t, v.Accept, v)
	require.False(t, v.Gap, v)
}

func TestCursorSeed(t *testing.T) {
	c := NewCursor(0)
	c.Seed(5, 10)
	require.Equal(t, DuplicateSeq, c.Offer(5, 10, "a").Reason)
	v := c.Offer(5, 12, "b")
	require.True(t, v.Accept, v)
	require.True(t, v.Gap, v)
	c.Seed(4, 100) // never backwards
	requirePosition(t, c, 5, 12)
}

func TestCursorIDMemoryBounded(t *testing.T) {
	c := NewCursor(4)
	for i := 1; i <= 1000; i++ {
		require.True(t, c.Offer(1, uint64(i), "id"+strconv.Itoa(i)).Accept, i)
	}
	require.Len(t, c.ids.m, 4, "remembered ids")
	require.Equal(t, DuplicateID, c.Offer(2, 1, "id1000").Reason)
	// An evicted ID under a newer token is new again (sequence protects the
	// current token's stream).
	require.True(t, c.Offer(2, 1, "id1").Accept)
}

func requirePosition(t *testing.T, c *Cursor, token, seq uint64) {
	t.Helper()
	tok, sq := c.Position()
	require.Equal(t, [2]uint64{token, seq}, [2]uint64{tok, sq}, "position")
}

func TestLimitsCheck(t *testing.T) {
	good := env("r", 1, 1, "id")
	require.Equal(t, ReasonNone, (Limits{}).Check(good))
	mod := func(f func(*Envelope)) Envelope { e := good; f(&e); return e }
	cases := map[string]struct {
		e    Envelope
		want Reason
	}{
		"foreign":       {mod(func(e *Envelope) { e.Protocol = "other" }), ForeignProtocol},
		"empty proto":   {mod(func(e *Envelope) { e.Protocol = "" }), ForeignProtocol},
		"version":       {mod(func(e *Envelope) { e.Version = 2 }), WrongVersion},
		"no id":         {mod(func(e *Envelope) { e.ID = "" }), Malformed},
		"no kind":       {mod(func(e *Envelope) { e.Kind = "" }), Malformed},
		"no resource":   {mod(func(e *Envelope) { e.Resource = "" }), Malformed},
		"no owner":      {mod(func(e *Envelope) { e.Owner = "" }), Malformed},
		"token 0":       {mod(func(e *Envelope) { e.Token = 0 }), Malformed},
		"token big":     {mod(func(e *Envelope) { e.Token = MaxToken + 1 }), Malformed},
		"seq 0":         {mod(func(e *Envelope) { e.Seq = 0 }), Malformed},
		"negative ts":   {mod(func(e *Envelope) { e.SentAt = -1 }), Malformed},
		"long kind":     {mod(func(e *Envelope) { e.Kind = strings.Repeat("k", 1000) }), Oversized},
		"long id":       {mod(func(e *Envelope) { e.ID = strings.Repeat("k", 1000) }), Oversized},
		"long owner":    {mod(func(e *Envelope) { e.Owner = strings.Repeat("k", 1000) }), Oversized},
		"long resource": {mod(func(e *Envelope) { e.Resource = strings.Repeat("k", 1000) }), Oversized},
	}
	for name, c := range cases {
		assert.Equal(t, c.want, (Limits{}).Check(c.e), name)
	}
	assert.Equal(t, Oversized, (Limits{MaxKind: 2}).Check(mod(func(e *Envelope) { e.Kind = "abcdefg" })), "custom limit ignored")
}

func TestSequencer(t *testing.T) {
	s := NewSequencer("r", "owner", 7)
	ids := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	seqs := map[uint64]bool{}
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				var zero Payload
				e := s.Next("k", zero)
				mu.Lock()
				assert.False(t, ids[e.ID] || seqs[e.Seq], "duplicate id or seq")
				ids[e.ID], seqs[e.Seq] = true, true
				mu.Unlock()
				assert.Equal(t, Envelope{Protocol: Protocol, Version: Version, ID: e.ID, Kind: "k", Resource: "r", Owner: "owner", Token: 7, Seq: e.Seq, SentAt: e.SentAt}, e)
				assert.Positive(t, e.SentAt)
				assert.Len(t, e.ID, 32)
				assert.Equal(t, ReasonNone, (Limits{}).Check(e), "sequencer output invalid: %+v", e)
			}
		}()
	}
	wg.Wait()
	for i := uint64(1); i <= 200; i++ {
		require.True(t, seqs[i], "seq %d missing", i)
	}
	require.Equal(t, uint64(7), s.Token())
}

func TestGuard(t *testing.T) {
	g := NewGuard()
	require.False(t, g.IsCurrent("r", 0) || g.IsStale("r", 0), "empty guard")
	require.Equal(t, uint64(0), g.Current("r"), "empty guard")
	g.Advance("r", 10)
	require.True(t, g.IsCurrent("r", 10) && !g.IsStale("r", 10), "10 current")
	// A search started under 10, a newer one under 11 (section 25).
	g.Advance("r", 11)
	require.True(t, !g.IsCurrent("r", 10) && g.IsStale("r", 10) && g.IsCurrent("r", 11), "10 must be stale after 11")
	g.Advance("r", 9) // never backwards
	require.Equal(t, uint64(11), g.Current("r"))
	require.False(t, g.IsStale("r", 12) || g.IsCurrent("r", 12), "future token is neither")
	require.Equal(t, uint64(0), g.Current("other"), "per resource")
}

func TestReceiverCountsAndDelivers(t *testing.T) {
	r := newReceiver(Limits{}, false)
	_, ok := r.receive(Envelope{}, Malformed)
	require.False(t, ok, "decode drop delivered")
	_, ok = r.receive(env("r", 1, 1, "a"), ReasonNone)
	require.True(t, ok, "first not delivered")
	r.receive(env("r", 1, 1, "a"), ReasonNone)         // duplicate id
	r.receive(env("r", 1, 1, "b"), ReasonNone)         // duplicate seq
	r.receive(mod(env("r", 2, 1, "c"), 9), ReasonNone) // version
	m, ok := r.receive(env("r", 1, 3, "d"), ReasonNone)
	require.True(t, ok && m.Gap, "gap not flagged")
	r.receive(env("r", 2, 1, "e"), ReasonNone)
	r.receive(env("r", 1, 9, "f"), ReasonNone) // stale
	s := r.snapshot()
	want := map[Reason]uint64{Malformed: 1, DuplicateID: 1, DuplicateSeq: 1, WrongVersion: 1, StaleToken: 1}
	for _, reason := range Reasons() {
		assert.Equal(t, want[reason], s.DroppedBy(reason), reason.String())
	}
	require.Equal(t, [4]uint64{8, 3, 1, 5}, [4]uint64{s.Received, s.Delivered, s.Gaps, s.TotalDropped()}, "received, delivered, gaps, dropped: %+v", s)
}

func mod(e Envelope, version int) Envelope { e.Version = version; return e }

func TestReceiverResourceBound(t *testing.T) {
	r := newReceiver(Limits{MaxResources: 3}, false)
	for i := 0; i < 10; i++ {
		r.receive(env("r"+strconv.Itoa(i), 1, 1, "id"+strconv.Itoa(i)), ReasonNone)
	}
	s := r.snapshot()
	require.Equal(t, uint64(3), s.Delivered)
	require.Equal(t, uint64(7), s.DroppedBy(Oversized))
	require.Len(t, r.cursors, 3)
}

func TestBufferThenReplayAppliesRulesInOrder(t *testing.T) {
	r := newReceiver(Limits{}, true)
	in := []Envelope{env("r", 5, 1, "a"), env("r", 5, 2, "b"), env("r", 4, 9, "old"), env("r", 5, 2, "b"), env("r", 6, 1, "c"), env("q", 1, 1, "q1")}
	for _, e := range in {
		_, ok := r.receive(e, ReasonNone)
		require.False(t, ok, "delivered while buffering")
	}
	r.receive(Envelope{Protocol: "x"}, ReasonNone) // dropped at once, not buffered
	s := r.snapshot()
	require.Equal(t, uint64(1), s.DroppedBy(ForeignProtocol))
	require.Equal(t, uint64(0), s.Delivered)
	out := r.replay()
	var got []string
	for _, m := range out {
		got = append(got, m.ID)
	}
	require.Equal(t, "a,b,c,q1", strings.Join(got, ","))
	s = r.snapshot()
	require.Equal(t, uint64(1), s.DroppedBy(StaleToken))
	require.Equal(t, uint64(1), s.DroppedBy(DuplicateID))
	// Live again.
	_, ok := r.receive(env("r", 6, 2, "d"), ReasonNone)
	require.True(t, ok, "not live after replay")
}

func TestBufferOverflowReportsGap(t *testing.T) {
	r := newReceiver(Limits{MaxBuffered: 3}, false)
	r.startBuffering()
	for i := 1; i <= 5; i++ {
		r.receive(env("r", 1, uint64(i), "m"+strconv.Itoa(i)), ReasonNone)
	}
	out := r.replay()
	require.Len(t, out, 3)
	require.Equal(t, uint64(3), out[0].Seq)
	require.True(t, out[0].Gap)
	require.False(t, out[1].Gap)
	require.Equal(t, uint64(2), r.snapshot().DroppedBy(Oversized))
}

func TestReasonNames(t *testing.T) {
	want := "stale_token,duplicate_seq,duplicate_id,malformed,version,oversized,foreign_protocol"
	var names []string
	for _, r := range Reasons() {
		names = append(names, r.String())
	}
	require.Equal(t, want, strings.Join(names, ","))
	require.Equal(t, "unknown", Reason(99).String())
	require.Equal(t, uint64(0), (Stats{}).DroppedBy(Reason(99)))
}

// TestSection17CrossTabStreamNeedsAllThree: the reference's decision matrix
// says a cross-tab live event stream needs token + sequence + message ID.
// Each case below is caught by exactly one of them.
func TestSection17CrossTabStreamNeedsAllThree(t *testing.T) {
	// Token: an old leader's fresh-looking message (new ID, new seq).
	c := NewCursor(0)
	c.Offer(2, 1, "a")
	require.Equal(t, StaleToken, c.Offer(1, 5, "b").Reason, "token")
	// Sequence: a late message of the current leader with a new ID
	// (e.g. re-sent after its ID left the window).
	c = NewCursor(1)
	c.Offer(2, 1, "a")
	c.Offer(2, 2, "b")
	require.Equal(t, DuplicateSeq, c.Offer(2, 1, "a-again").Reason, "sequence")
	// Message ID: a new leader re-announcing what the old one sent: same
	// ID, higher token, seq 1 — token and sequence alone would accept it.
	c = NewCursor(0)
	c.Offer(2, 4, "x")
	require.Equal(t, DuplicateID, c.Offer(3, 1, "x").Reason, "id")
	// Timestamps and UUIDs order nothing: SentAt and ID never reorder.
	c = NewCursor(0)
	c.Offer(2, 1, "zzzz")
	require.True(t, c.Offer(2, 2, "0000").Accept, "an ID must not be read as an order")
}
