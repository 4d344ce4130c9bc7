//go:build e2e

package e2e

import (
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// Who hears a post, and when a first message is a gap: what the loader's
// types promise about ctx.post, Channel.post and Channel.seed.

// A leader's ctx.post reaches every channel of the lock name, its own
// page's included; a Channel object's post reaches the page's other
// channels and the other tabs, never the posting object itself.
func TestPostReachesOwnPageButNotPoster(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupFence(t, k)
		s, r := scope(t), "own-"+scope(t)
		leader := e.fencedTab(s, r)
		waitF(t, leader, "leader", 1)
		follower := e.fencedTab(s, r)
		waitF(t, follower, "follower", 1)
		eval[any](t, leader, `(() => { T.msgs2 = [];
		T.ch2 = tabfenceDemo.tf.channel(T.el.lockName);
		T.ch2.subscribe((m) => T.msgs2.push(m.payload)); return null; })()`)

		eval[any](t, leader, `T.ctx.post("delta", 1).then(() => null)`)
		waitJS(t, leader, "the leader's own subscription to hear ctx.post", `T.msgs.length === 1 && T.msgs2.length === 1`)
		waitJS(t, follower, "the follower to hear ctx.post", `T.msgs.length === 1`)

		eval[any](t, leader, `T.ch.post("delta", 2).then(() => null)`)
		waitJS(t, leader, "the page's other channel to hear T.ch.post", `T.msgs2.length === 2`)
		waitJS(t, follower, "the follower to hear T.ch.post", `T.msgs.length === 2`)
		// A third post through ctx.post: once T.ch has it, T.ch would have had
		// the second before it (one channel delivers in order).
		eval[any](t, leader, `T.ctx.post("delta", 3).then(() => null)`)
		waitJS(t, leader, "the leader's subscription to hear the third post", `T.msgs.length === 2`)
		got := eval[[]float64](t, leader, `T.msgs.map((m) => m.payload)`)
		require.True(t, slices.Equal(got, []float64{1, 3}), "the posting channel heard %v, want [1 3]: its own post was delivered back to it", got)
	})
}

// A channel that was never seeded reports no gap on its first message,
// whatever its sequence; one seeded with the loaded position reports the
// gap when the first message is past it.
func TestFirstMessageGapNeedsSeed(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupFence(t, k)
		s, r := scope(t), "seed-"+scope(t)
		leader := e.fencedTab(s, r)
		tok := waitF(t, leader, "leader", 1).Token
		reader := e.fencedTab(s, r)
		waitF(t, reader, "follower", 1)
		for i := 1; i <= 3; i++ {
			eval[any](t, leader, `T.ctx.post("delta", `+strconv.Itoa(i)+`).then(() => null)`)
		}
		waitJS(t, reader, "the reader to hear three posts", `T.msgs.length === 3`)
		// Three new readers of the same lock name, as a tab that loads later:
		// not seeded, seeded two behind, seeded at the last one seen.
		eval[any](t, reader, `((tok) => { T.late = { fresh: [], behind: [], current: [] };
		for (const k of Object.keys(T.late)) {
			const ch = tabfenceDemo.tf.channel(T.el.lockName);
			if (k === "behind") ch.seed(`+jsStr(r)+`, tok, 1);
			if (k === "current") ch.seed(`+jsStr(r)+`, tok, 3);
			ch.subscribe((m) => T.late[k].push({ seq: m.seq, gap: m.gap }));
		}
		return null; })(`+strconv.Itoa(int(tok))+`)`)
		eval[any](t, leader, `T.ctx.post("delta", 4).then(() => null)`)
		waitJS(t, reader, "the late readers to hear seq 4", `Object.values(T.late).every((a) => a.length === 1)`)
		got := eval[string](t, reader, `["fresh", "behind", "current"].map((k) => T.late[k][0].seq + ":" + T.late[k][0].gap).join(" ")`)
		require.Equal(t, "4:false 4:true 4:false", got, "first message per reader (fresh, seeded behind, seeded current)")
	})
}
