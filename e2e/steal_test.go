//go:build e2e

package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// A steal deposes the old leader at the moment the thief's token is
// allocated, not when the thief first writes: the fence reads the
// allocation record in the write's own transaction. And a leader frozen
// inside a transaction does not block the thief: the page's freeze event
// aborts the runtime's open transactions.

// note reads notes/key of the "tabfence" database with plain IndexedDB.
func note(t *testing.T, tab *harness.Tab, key string) string {
	t.Helper()
	return eval[string](t, tab, `new Promise((res, rej) => {
		const q = indexedDB.open("tabfence"); q.onerror = () => rej(q.error);
		q.onsuccess = () => { const db = q.result; const g = db.transaction("notes").objectStore("notes").get(`+jsStr(key)+`);
			g.onsuccess = () => { db.close(); res(String(g.result)); }; g.onerror = () => rej(g.error); };
	})`)
}

// putDoc is a ctx.apply of notes/doc = value under operation id.
func putDoc(ctx, id, value string) string {
	return ctx + `.apply({ operationID: ` + jsStr(id) + ` }, [{ store: "notes", op: "put", key: "doc", value: ` + jsStr(value) + ` }])`
}

// leaderAndFollower opens a fenced leader that has written notes/doc =
// "old-1" and a follower of the same election, on a resource of its own.
func leaderAndFollower(t *testing.T, k harness.Kind, prefix string) (old, thief *harness.Tab, t1 float64) {
	t.Helper()
	e := setupFence(t, k)
	s, r := scope(t), prefix+"-"+scope(t)
	old = e.fencedTab(s, r)
	t1 = waitF(t, old, "leader", 1).Token
	require.Equal(t, "accepted", eval[string](t, old, putDoc("T.ctx", "old-1", "old-1")), "old leader's first write")
	thief = e.fencedTab(s, r)
	waitF(t, thief, "follower", 1)
	return old, thief, t1
}

// The thief steals and writes nothing; the old leader's context writes at
// once: stale, the store unchanged, and the old page's guard knows.
func TestFenceStealThenOldLeaderWritesAtOnce(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		old, thief, t1 := leaderAndFollower(t, k, "steal")

		t2 := eval[float64](t, thief, `T.el.steal().then((c) => c.token)`)
		require.Greater(t, t2, t1, "thief's token %v is not above %v", t2, t1)
		got := eval[string](t, old, putDoc("T.ctx", "old-2", "old-2"))
		require.Equal(t, "stale", got, "old leader's write after the steal, before the thief wrote: %s, want stale", got)
		got = note(t, old, "doc")
		require.Equal(t, "old-1", got, "notes/doc = %q, want old-1 (unchanged)", got)
		require.True(t, eval[bool](t, old, `T.guard.isStale(T.ctx.token) && T.guard.current === `+strconv.Itoa(int(t2))), "old page's guard: current %v, isStale(%v) %v", eval[float64](t, old, `T.guard.current`), t1, eval[bool](t, old, `T.guard.isStale(T.ctx.token)`))
		if lost := waitF(t, old, "lost", 1); lost.Reason != "stolen" && lost.Reason != "fenced" {
			t.Fatalf("old leader lost with %q", lost.Reason)
		}
		require.Equal(t, "accepted", eval[string](t, thief, putDoc("T.ctx", "thief-1", "thief")), "thief's write")
		got = note(t, thief, "doc")
		require.Equal(t, "thief", got, "notes/doc = %q, want thief", got)
	})
}

// The frozen variant: the leader is frozen, the thief steals (and writes
// nothing), the leader resumes and writes at once: stale.
func TestFenceFrozenStealThenResumedLeaderWritesAtOnce(t *testing.T) {
	chromiumOnly(t, "freezes the leader page: Page.setWebLifecycleState is CDP-only", func(t *testing.T, k harness.Kind) {
		old, thief, t1 := leaderAndFollower(t, k, "fsteal")

		setFrozen(t, old, true)
		t2 := eval[float64](t, thief, `T.el.steal().then((c) => c.token)`)
		setFrozen(t, old, false)
		require.Greater(t, t2, t1, "thief's token %v is not above %v", t2, t1)
		got := eval[string](t, old, putDoc("T.ctx", "old-2", "old-2"))
		require.Equal(t, "stale", got, "resumed leader's write: %s, want stale", got)
		got = note(t, thief, "doc")
		require.Equal(t, "old-1", got, "notes/doc = %q, want old-1 (unchanged)", got)
		if lost := waitF(t, old, "lost", 1); lost.Reason != "stolen" && lost.Reason != "fenced" {
			t.Fatalf("old leader lost with %q", lost.Reason)
		}
	})
}

// loopJS installs T.startLoop(label): fenced applies of notes/doc back to
// back under the current leader context, recording each result, until three
// are stale.
const loopJS = `(() => {
	T.startLoop = (label) => {
		const ctx = T.ctx, L = T.loop = { res: [], done: false };
		(async () => {
			let n = 0, stale = 0;
			while (stale < 3 && n < 1e6) {
				let r;
				try {
					r = await ctx.apply({ operationID: label + "-" + n }, [{ store: "notes", op: "put", key: "doc", value: label + "-" + n }]);
				} catch (err) { r = err.name + ": " + err.message; }
				L.res.push(r);
				n++;
				if (r === "stale") stale++;
			}
			L.done = true;
		})();
		return null;
	};
	return null;
})()`

// stealJS steals, then writes value, in the page: the time both took in
// ms, or "timeout" when they did not finish within 5 s.
const stealJS = `(async (value) => {
	const t0 = performance.now();
	const work = T.el.steal().then((c) => c.apply({ operationID: value }, [{ store: "notes", op: "put", key: "doc", value }]))
		.then((r) => ({ r, ms: performance.now() - t0 }), (err) => ({ r: err.name + ": " + err.message, ms: performance.now() - t0 }));
	return Promise.race([work, new Promise((res) => setTimeout(() => res({ r: "timeout", ms: performance.now() - t0 }), 5000))]);
})`

// A leader writing in a tight loop is frozen (most likely inside one of its
// transactions) and the other tab steals and writes, 20 times in a row with
// the roles swapping: each time the steal and the write complete within 1 s,
// the frozen leader's writes after it resumes are stale, and the store
// holds the thief's value.
func TestFenceFrozenTightLoopDoesNotBlockThief(t *testing.T) {
	chromiumOnly(t, "freezes the leader page: Page.setWebLifecycleState is CDP-only", func(t *testing.T, k harness.Kind) {
		e := setupFence(t, k)
		s, r := scope(t), "loop-"+scope(t)
		tabs := []*harness.Tab{e.fencedTab(s, r), e.fencedTab(s, r)}
		waitF(t, tabs[0], "leader", 1)
		waitF(t, tabs[1], "follower", 1)
		for _, tab := range tabs {
			eval[any](t, tab, loopJS)
		}
		led := []int{1, 0} // leaderships seen per tab
		inFlight, worst := 0, 0.0
		for round := range 20 {
			li := round % 2
			leader, thief := tabs[li], tabs[1-li]
			waitJS(t, leader, "round "+strconv.Itoa(round)+": the leader's context", `T.el.isLeader && T.ctx && !T.ctx.signal.aborted`)
			eval[any](t, leader, `T.startLoop("L`+strconv.Itoa(round)+`")`)
			waitJS(t, leader, "the loop to write", `T.loop.res.filter((r) => r === "accepted").length >= 5`)

			setFrozen(t, leader, true)
			nFrozen := eval[int](t, leader, `T.loop.res.length`)
			value := "thief-" + strconv.Itoa(round)
			got := eval[map[string]any](t, thief, stealJS+`(`+jsStr(value)+`)`)
			setFrozen(t, leader, false)
			ms, _ := got["ms"].(float64)
			if got["r"] != "accepted" || ms > 1000 {
				t.Fatalf("round %d: the thief's steal and write: %v after %.0f ms, want accepted within 1 s", round, got["r"], ms)
			}
			worst = max(worst, ms)
			led[1-li]++
			waitF(t, thief, "leader", led[1-li])

			waitJS(t, leader, "the resumed leader's loop to end", `T.loop.done`)
			res := eval[[]string](t, leader, `T.loop.res`)
			require.Greater(t, len(res), nFrozen+1, "round %d: no write after the resume: %v", round, res[nFrozen:])
			// res[nFrozen] was in flight at the freeze: aborted by it (an
			// error), or committed before the thief's allocation could run.
			if res[nFrozen] != "accepted" && res[nFrozen] != "stale" {
				inFlight++
			}
			for i, x := range res[nFrozen+1:] {
				require.Equal(t, "stale", x, "round %d: the resumed leader's write %d: %s, want stale (in flight at the freeze: %s)", round, i, x, res[nFrozen])
			}
			require.Equal(t, value, note(t, thief, "doc"), "round %d: notes/doc", round)
			require.NoError(t, harness.Poll(context.Background(), "the old leader to rejoin", failoverTimeout, 20*time.Millisecond, func() (bool, error) {
				return harness.Eval[bool](leader, `!T.el.isLeader`)
			}))
		}
		t.Logf("20 rounds: steal + write at most %.0f ms; the freeze aborted a write in flight in %d rounds", worst, inFlight)
	})
}
