//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// Fenced leadership, tf.fence and tf.channel across real tabs (issue 3).
// Every tab is the demo page (for its loaded runtime, tabfenceDemo.tf) with
// a fenced election of its own installed by fencedTab: window.T records
// its events, messages and results.

// setupFence is setup with the delayed test route /test/slow?ms=N, which
// answers {"value":"slow"} after N ms: the old leader's late fetch.
func setupFence(t *testing.T, k harness.Kind) *env {
	t.Helper()
	return setupServing(t, k, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/test/slow" {
				next.ServeHTTP(w, r)
				return
			}
			ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
			select {
			case <-time.After(time.Duration(ms) * time.Millisecond):
			case <-r.Context().Done():
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"value":"slow"}`))
		})
	})
}

// runtimeTab opens a page with the runtime loaded (the demo, on a scope of
// its own so its unfenced election is out of the way).
func (e *env) runtimeTab() *harness.Tab {
	e.t.Helper()
	return e.open("", scope(e.t)+"-demo", 1, "ready")
}

// fencedJS installs window.T: a fenced election of scope s on resource r
// with the store "notes", its channel subscribed, and its fence.
const fencedJS = `((s, r) => {
	const tf = tabfenceDemo.tf;
	const T = window.T = { ev: [], msgs: [], ctx: null };
	T.el = tf.elect({ scope: s, protocol: 1, resource: r, stores: ["notes"],
		onLeader(ctx) { T.ctx = ctx; T.ev.push({ type: "leader", token: ctx.token }); },
		onFollower() { T.ev.push({ type: "follower" }); },
		onLost(reason, err) { T.ev.push({ type: "lost", reason, name: err.name, message: err.message }); },
	});
	T.ch = tf.channel(T.el.lockName);
	T.ch.subscribe((m) => T.msgs.push({ kind: m.kind, token: m.token, seq: m.seq, gap: m.gap, owner: m.owner, payload: m.payload }));
	T.fence = tf.fence(r);
	T.guard = T.fence.guard();
	return T.el.fenced;
})`

type fevent struct {
	Type    string  `json:"type"`
	Token   float64 `json:"token"`
	Reason  string  `json:"reason"`
	Name    string  `json:"name"`
	Message string  `json:"message"`
}

type fmsg struct {
	Kind    string  `json:"kind"`
	Token   float64 `json:"token"`
	Seq     float64 `json:"seq"`
	Gap     bool    `json:"gap"`
	Payload any     `json:"payload"`
}

func (e *env) fencedTab(s, r string) *harness.Tab {
	e.t.Helper()
	tab := e.runtimeTab()
	require.True(e.t, eval[bool](e.t, tab, fencedJS+`(`+jsStr(s)+`, `+jsStr(r)+`)`), "election is not fenced")
	return tab
}

func jsStr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func fevents(t *testing.T, tab *harness.Tab) []fevent {
	t.Helper()
	raw := eval[string](t, tab, `JSON.stringify(T.ev)`)
	var evs []fevent
	require.NoError(t, json.Unmarshal([]byte(raw), &evs))
	return evs
}

func fmsgs(t *testing.T, tab *harness.Tab) []fmsg {
	t.Helper()
	raw := eval[string](t, tab, `JSON.stringify(T.msgs)`)
	var ms []fmsg
	require.NoError(t, json.Unmarshal([]byte(raw), &ms))
	return ms
}

// waitF waits for the nth event of type typ in window.T.
func waitF(t *testing.T, tab *harness.Tab, typ string, n int) fevent {
	t.Helper()
	var got fevent
	err := harness.Poll(context.Background(), strconv.Itoa(n)+" "+typ+" event(s)", failoverTimeout, 20*time.Millisecond, func() (bool, error) {
		k := 0
		for _, e := range fevents(t, tab) {
			if e.Type == typ {
				if k++; k == n {
					got = e
					return true, nil
				}
			}
		}
		return false, nil
	})
	require.NoError(t, err)
	return got
}

func waitJS(t *testing.T, tab *harness.Tab, what, cond string) {
	t.Helper()
	err := harness.Poll(context.Background(), what, failoverTimeout, 20*time.Millisecond, func() (bool, error) {
		return harness.Eval[bool](tab, `!!(`+cond+`)`)
	})
	require.NoError(t, err)
}

type dropStats struct {
	Received     float64            `json:"received"`
	Delivered    float64            `json:"delivered"`
	Dropped      map[string]float64 `json:"dropped"`
	DroppedTotal float64            `json:"droppedTotal"`
}

func chanStats(t *testing.T, tab *harness.Tab) dropStats {
	t.Helper()
	raw := eval[string](t, tab, `JSON.stringify(T.ch.stats())`)
	var s dropStats
	require.NoError(t, json.Unmarshal([]byte(raw), &s))
	return s
}

// (1) Three tabs allocate 300 tokens concurrently: all unique, strictly
// increasing within each tab, and together exactly 1..300.
func TestFenceConcurrentTokenAllocation(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupFence(t, k)
		res := "alloc-" + scope(t)
		tabs := []*harness.Tab{e.runtimeTab(), e.runtimeTab(), e.runtimeTab()}
		got := make([][]float64, len(tabs))
		errs := make([]error, len(tabs))
		var wg sync.WaitGroup
		for i, tab := range tabs {
			wg.Go(func() {
				got[i], errs[i] = harness.Eval[[]float64](tab, `(async (r) => {
				const f = tabfenceDemo.tf.fence(r);
				const out = [];
				for (let i = 0; i < 100; i++) out.push(await f.allocate());
				return out;
			})(`+jsStr(res)+`)`)
			})
		}
		wg.Wait()
		var all []float64
		for i := range tabs {
			require.NoError(t, errs[i], "tab %d", i)
			require.Len(t, got[i], 100, "tab %d allocated %d tokens", i, len(got[i]))
			for j := 1; j < len(got[i]); j++ {
				require.Greater(t, got[i][j], got[i][j-1], "tab %d: token %v after %v", i, got[i][j], got[i][j-1])
			}
			all = append(all, got[i]...)
		}
		slices.Sort(all)
		for i, v := range all {
			require.Equal(t, float64(i+1), v, "tokens are not exactly 1..300: position %d holds %v", i, v)
		}
		// The tabs really interleaved: no tab got one contiguous block.
		interleaved := 0
		for i := range tabs {
			if got[i][99]-got[i][0] > 99 {
				interleaved++
			}
		}
		t.Logf("%d of 3 tabs' tokens interleaved with others", interleaved)
	})
}

// setFrozen freezes (Page Lifecycle "frozen") or resumes the tab.
func setFrozen(t *testing.T, tab *harness.Tab, frozen bool) {
	t.Helper()
	require.NoError(t, tab.SetFrozen(frozen), "SetFrozen(%v)", frozen)
}

// (2) Frozen leader: freeze the leader, another tab steals, allocates a
// higher token and writes; the frozen tab, still believing it leads, writes
// and broadcasts. After it resumes its write is rejected as stale, its
// broadcast was dropped by every follower (counted), and it has stepped
// down: onLost fired, the lock is the thief's alone.
func TestFenceFrozenLeaderIsFenced(t *testing.T) {
	chromiumOnly(t, "freezes the leader page: Page.setWebLifecycleState is CDP-only", func(t *testing.T, k harness.Kind) {
		e := setupFence(t, k)
		s, r := scope(t), "notes-"+scope(t)
		old := e.fencedTab(s, r)
		t1 := waitF(t, old, "leader", 1).Token
		thief := e.fencedTab(s, r)
		waitF(t, thief, "follower", 1)
		watcher := e.fencedTab(s, r)
		waitF(t, watcher, "follower", 1)
		require.GreaterOrEqual(t, t1, float64(1), "leader token")
		eval[any](t, old, `T.ctx.post("delta", { v: 1 }).then(() => null)`)
		waitJS(t, watcher, "the first delta", `T.msgs.length === 1`)

		setFrozen(t, old, true)
		t2 := eval[float64](t, thief, `T.el.steal().then((c) => c.token)`)
		require.Greater(t, t2, t1, "thief's token %v is not above %v", t2, t1)
		require.Equal(t, "accepted", eval[string](t, thief, `T.ctx.apply({ operationID: "thief-1" }, [{ store: "notes", op: "put", key: "doc", value: "thief" }])`), "thief's apply")
		eval[any](t, thief, `T.ctx.post("delta", { v: 2 }).then(() => null)`)
		waitJS(t, watcher, "the thief's delta", `T.msgs.length === 2`)

		// The frozen page still runs evaluated script: it writes and
		// broadcasts under its old token, as a tab that resumes mid-work does.
		before := eval[string](t, old, `(() => {
		T.applyResult = null; T.postResult = null;
		const before = String(T.el.isLeader) + " " + T.ctx.signal.aborted;
		T.ctx.apply({ operationID: "old-1" }, [{ store: "notes", op: "put", key: "doc", value: "old" }])
			.then((r) => { T.applyResult = r; }, (e) => { T.applyResult = e.name; });
		T.ctx.post("delta", { v: "stale" }).then(() => { T.postResult = "sent"; }, (e) => { T.postResult = e.name; });
		return before;
	})()`)
		t.Logf("frozen old leader believed: isLeader aborted = %s", before)
		setFrozen(t, old, false)

		waitJS(t, old, "the old leader's apply to settle", `T.applyResult !== null && T.postResult !== null`)
		got := eval[string](t, old, `T.applyResult`)
		require.Equal(t, "stale", got, "old leader's write: %s, want stale", got)
		post := eval[string](t, old, `T.postResult`)
		t.Logf("old leader's broadcast: %s", post)
		lost := waitF(t, old, "lost", 1)
		if lost.Reason != "stolen" && lost.Reason != "fenced" {
			t.Fatalf("old leader lost with %q", lost.Reason)
		}
		t.Logf("old leader stepped down: %s (%s: %s)", lost.Reason, lost.Name, lost.Message)
		require.False(t, eval[bool](t, old, `T.el.isLeader || T.ctx.signal.aborted === false`), "old leader still believes it leads")
		st, err := watcher.Locks(eval[string](t, watcher, `T.el.lockName`))
		require.NoError(t, err)
		require.Equal(t, 1, st.Held, "lock held %d, thief leads %v", st.Held, eval[bool](t, thief, `T.el.isLeader`))
		require.True(t, eval[bool](t, thief, `T.el.isLeader`), "lock held %d, thief leads %v", st.Held, eval[bool](t, thief, `T.el.isLeader`))
		// Storage holds the thief's write only.
		got = eval[string](t, watcher, `new Promise((res, rej) => {
		const q = indexedDB.open("tabfence"); q.onerror = () => rej(q.error);
		q.onsuccess = () => { const db = q.result; const g = db.transaction("notes").objectStore("notes").get("doc");
			g.onsuccess = () => { db.close(); res(g.result); }; g.onerror = () => rej(g.error); };
	})`)
		require.Equal(t, "thief", got, "notes/doc = %q, want thief", got)
		if post == "sent" {
			// Every follower (and the thief itself, whose channel heard it)
			// dropped the stale broadcast, counted as stale_token.
			for name, tab := range map[string]*harness.Tab{"watcher": watcher, "thief": thief} {
				require.NoError(t, harness.Poll(context.Background(), name+" counts the stale broadcast", failoverTimeout, 20*time.Millisecond, func() (bool, error) {
					return chanStats(t, tab).Dropped["stale_token"] >= 1, nil
				}))
				for _, m := range fmsgs(t, tab) {
					if m.Token == t1 && m.Seq > 1 {
						t.Fatalf("%s delivered the stale broadcast: %+v", name, m)
					}
				}
			}
		} else if post != "NotLeaderError" {
			t.Fatalf("old leader's post: %s", post)
		}
		ms := fmsgs(t, watcher)
		require.Len(t, ms, 2, "watcher's messages")
		require.Equal(t, t2, ms[1].Token, "watcher's messages")
	})
}

// (3) A late response: the old leader's slow fetch comes back after a newer
// leader applied its own result. The guard (advanced by the newer leader's
// broadcast) says stale, and the fenced apply rejects it anyway.
func TestFenceLateResponseIgnored(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupFence(t, k)
		s, r := scope(t), "cfg-"+scope(t)
		old := e.fencedTab(s, r)
		t1 := waitF(t, old, "leader", 1).Token
		newer := e.fencedTab(s, r)
		waitF(t, newer, "follower", 1)

		eval[any](t, old, `(() => {
		const ctx = T.ctx; // captured: the callback outlives the leadership, as real ones do
		T.late = null;
		fetch("/test/slow?ms=1500").then((res) => res.json()).then(async (body) => {
			const guardSaid = T.guard.isStale(ctx.token) ? "stale" : T.guard.isCurrent(ctx.token) ? "current" : "unknown";
			const fenceSaid = await T.fence.apply({ token: ctx.token, operationID: "old-refresh" },
				[{ store: "notes", op: "put", key: "config", value: body.value }]);
			T.late = { guardSaid, fenceSaid };
		}).catch((e) => { T.late = { error: e.name + ": " + e.message }; });
		return null;
	})()`)
		t2 := eval[float64](t, newer, `T.el.steal().then((c) => c.token)`)
		require.Equal(t, "accepted", eval[string](t, newer, `T.ctx.apply({ operationID: "new-refresh" }, [{ store: "notes", op: "put", key: "config", value: "fresh" }])`), "newer leader's apply")
		eval[any](t, newer, `T.ctx.post("config", { token: T.ctx.token }).then(() => null)`)
		waitJS(t, old, "the late response", `T.late !== null`)
		late := eval[map[string]string](t, old, `T.late`)
		require.Equal(t, "stale", late["guardSaid"], "late response (token %v after %v): %v", t1, t2, late)
		require.Equal(t, "stale", late["fenceSaid"], "late response (token %v after %v): %v", t1, t2, late)
		got := eval[string](t, newer, `T.fence.highest()`+`.then(String)`)
		require.Equal(t, strconv.Itoa(int(t2)), got, "fence highest %s, want %v", got, t2)
	})
}

// (4) The same operation delivered twice — by the leader retrying, and by a
// follower replaying it — is applied once.
func TestFenceSameOperationAppliedOnce(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupFence(t, k)
		s, r := scope(t), "ops-"+scope(t)
		leader := e.fencedTab(s, r)
		tok := waitF(t, leader, "leader", 1).Token
		other := e.fencedTab(s, r)
		waitF(t, other, "follower", 1)
		op := `{ token: ` + strconv.Itoa(int(tok)) + `, operationID: "op-once", sequence: 1 }`
		// "add" fails the whole transaction if the key exists: applying twice
		// would be an error, not a silent overwrite.
		writes := `[{ store: "notes", op: "add", key: "once", value: 1 }]`
		got := eval[[]string](t, leader, `(async () => [await T.ctx.apply(`+op+`, `+writes+`), await T.fence.apply(`+op+`, `+writes+`)])()`)
		got = append(got, eval[string](t, other, `T.fence.apply(`+op+`, `+writes+`)`))
		require.True(t, slices.Equal(got, []string{"accepted", "duplicate", "duplicate"}), "results %v", got)
		// A new operation under the same token is accepted; a replayed
		// sequence with a new ID is a duplicate.
		more := eval[[]string](t, leader, `(async () => [
		await T.ctx.apply({ operationID: "op-2", sequence: 2 }, [{ store: "notes", op: "put", key: "two", value: 2 }]),
		await T.ctx.apply({ operationID: "op-2b", sequence: 2 }, [{ store: "notes", op: "put", key: "two", value: 3 }]),
	])()`)
		require.True(t, slices.Equal(more, []string{"accepted", "duplicate"}), "sequenced results %v", more)
		require.True(t, eval[bool](t, leader, `T.el.isLeader`), "a duplicate made the leader step down")
	})
}

// (5) A hostile page script posts garbage and forged envelopes on the
// channel: nothing crashes, every drop is counted by reason. A forged
// higher token from a script that is not the leader is accepted by the
// followers' cursors (no receiver can tell it from a real one without
// storage) but it does not depose the real leader, which checks the
// allocated epoch in IndexedDB first.
func TestFenceHostileChannelMessages(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupFence(t, k)
		s, r := scope(t), "hostile-"+scope(t)
		hostile := e.runtimeTab()
		eval[float64](t, hostile, `tabfenceDemo.tf.fence(`+jsStr(r)+`).allocate()`) // the leader's token will be 2
		leader := e.fencedTab(s, r)
		tok := waitF(t, leader, "leader", 1).Token
		follower := e.fencedTab(s, r)
		waitF(t, follower, "follower", 1)
		eval[any](t, leader, `T.ctx.post("delta", 1).then(() => null)`)
		waitJS(t, follower, "the real delta", `T.msgs.length === 1`)
		// The leader says on the console when it dismisses a forged token.
		eval[any](t, leader, `(() => { window.warnings = []; const warn = console.warn;
		console.warn = (...a) => { window.warnings.push(a.join(" ")); warn.apply(console, a); }; return null; })()`)

		eval[any](t, hostile, `(async (name, r, tok) => {
		const bc = new BroadcastChannel(name);
		const env = (o) => Object.assign({ protocol: "tabfence", version: 1, id: crypto.randomUUID(), kind: "delta",
			resource: r, owner: "mallory", token: tok, seq: 99, sentAt: Date.now(), payload: null }, o);
		const garbage = [null, undefined, 42, NaN, "string", "x".repeat(4 << 20), [1, 2], {}, true,
			{ protocol: "other" }, { protocol: 7 },
			env({ version: 2 }), env({ version: "1" }),
			env({ token: -1 }), env({ token: 1.5 }), env({ token: 2 ** 60 }), env({ token: "9" }), env({ seq: 0 }),
			env({ id: "" }), env({ id: 5 }), env({ kind: "k".repeat(10000) }), env({ resource: "r".repeat(1e6) }),
			env({ payload: "p".repeat(2 << 20) }), env({ payload: new ArrayBuffer(2 << 20) }),
			env({ token: tok - 1 }), // a stale token
		];
		for (const g of garbage) bc.postMessage(g);
		bc.postMessage(env({ seq: 1 })); // the current token's first sequence again
		// A forged envelope with a much higher token, from a non-leader,
		// posted twice:
		const forged = env({ token: tok + 1000, seq: 1, kind: "forged" });
		bc.postMessage(forged);
		bc.postMessage(forged);
		bc.close();
		return null;
	})(`+jsStr(eval[string](t, leader, `T.el.lockName`))+`, `+jsStr(r)+`, `+strconv.Itoa(int(tok))+`)`)

		require.NoError(t, harness.Poll(context.Background(), "the follower to count the garbage", failoverTimeout, 20*time.Millisecond, func() (bool, error) {
			st := chanStats(t, follower)
			return st.Received >= 29, nil
		}))
		st := chanStats(t, follower)
		t.Logf("follower stats: received %v delivered %v dropped %v", st.Received, st.Delivered, st.Dropped)
		for _, reason := range []string{"malformed", "version", "oversized", "foreign_protocol", "stale_token", "duplicate_seq", "duplicate_id"} {
			assert.NotEqual(t, float64(0), st.Dropped[reason], "no %s drop counted", reason)
		}
		assert.Equal(t, float64(27), st.DroppedTotal, "only %v drops counted", st.DroppedTotal)
		assert.Equal(t, float64(2), st.Delivered, "only %v drops counted", st.DroppedTotal)
		// The forged token was delivered (the risk) ...
		ms := fmsgs(t, follower)
		last := ms[len(ms)-1]
		require.Equal(t, "forged", last.Kind, "follower's last message")
		require.Equal(t, tok+1000, last.Token, "follower's last message")
		// ... but the real leader was not deposed by it, and both runtimes work.
		// Wait until the leader has checked the forged token against
		// IndexedDB and dismissed it (a wrong step-down would come from there).
		waitJS(t, leader, "the leader to dismiss the forged token", `window.warnings.some(w => w.includes("ignored a message claiming token `+strconv.Itoa(int(tok)+1000)+`"))`)
		require.True(t, eval[bool](t, leader, `T.el.isLeader && !T.ctx.signal.aborted`), "the forged token deposed the leader: %+v", fevents(t, leader))
		require.Equal(t, "tabfence:x:v1", eval[string](t, follower, `tabfenceDemo.tf.lockName("x", 1)`), "follower runtime")
		// The cost of the forgery: the real leader's next message is now
		// "stale" at that follower, until a newer leadership.
		eval[any](t, leader, `T.ctx.post("delta", 2).then(() => null)`)
		require.NoError(t, harness.Poll(context.Background(), "the follower to drop the real leader's next message", failoverTimeout, 20*time.Millisecond, func() (bool, error) {
			return chanStats(t, follower).Dropped["stale_token"] >= 2, nil
		}))
		// The leader's page can post through any channel object of the lock
		// name; the sequence continues the leadership's (1, 2 were ctx.post).
		// It resolves to {id, token, seq} of what it sent (the loader builds it
		// from the envelope it posted).
		require.Equal(t, "id,token,seq/"+strconv.Itoa(int(tok))+"/3/true", eval[string](t, leader, `T.ch.post("delta", 3).then((r) => Object.keys(r).join() + "/" + r.token + "/" + r.seq + "/" + /^[0-9a-f]{32}$/.test(r.id))`), "leader's channel post")
		// Posting from a follower is refused with a named error.
		require.Equal(t, "NotLeaderError", eval[string](t, follower, `T.ch.post("delta", 1).then(() => "sent", (e) => e.name)`), "follower post")
	})
}

// (6) Deleting the database from one tab (sign-out) makes the leader in
// another tab release the lock (onLost "deleted"), its followers leave too,
// the delete is not blocked, and a new tab leads with a fresh database.
func TestFenceDatabaseDeletedLeaderReleases(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupFence(t, k)
		s, r := scope(t), "del-"+scope(t)
		leader := e.fencedTab(s, r)
		waitF(t, leader, "leader", 1)
		follower := e.fencedTab(s, r)
		waitF(t, follower, "follower", 1)
		require.Equal(t, "accepted", eval[string](t, leader, `T.ctx.apply({ operationID: "before" }, [{ store: "notes", op: "put", key: "k", value: "v" }])`))
		name := eval[string](t, leader, `T.el.lockName`)

		signout := e.runtimeTab()
		start := time.Now()
		eval[any](t, signout, `new Promise((res, rej) => {
		const q = indexedDB.deleteDatabase("tabfence");
		q.onsuccess = () => res(null); q.onerror = () => rej(q.error);
		q.onblocked = () => rej(new Error("delete blocked"));
	})`)
		t.Logf("delete took %v", time.Since(start).Round(time.Millisecond))
		lost := waitF(t, leader, "lost", 1)
		require.Equal(t, "deleted", lost.Reason, "leader lost with %q (%s)", lost.Reason, lost.Message)
		l := waitF(t, follower, "lost", 1)
		require.Equal(t, "deleted", l.Reason, "follower lost with %q", l.Reason)
		require.NoError(t, harness.Poll(context.Background(), "the lock to be free", failoverTimeout, 20*time.Millisecond, func() (bool, error) {
			st, err := signout.Locks(name)
			return st.Held == 0 && st.Pending == 0, err
		}))
		require.Equal(t, "DatabaseDeletedError", eval[string](t, leader, `T.fence.apply({ token: 99, operationID: "after" }, []).then(String, (e) => e.name)`), "old fence after delete")
		fresh := e.fencedTab(s, r)
		tok := waitF(t, fresh, "leader", 1).Token
		require.Equal(t, float64(1), tok, "new tab's token %v, want 1 from a fresh database", tok)
		require.Equal(t, "accepted", eval[string](t, fresh, `T.ctx.apply({ operationID: "after" }, [{ store: "notes", op: "put", key: "k", value: "w" }])`))
	})
}

// A runtime that dies while leading (a Go exit or a WebAssembly trap, the
// way TestRuntimeDeathRejectsCalls simulates them) releases its Web Lock:
// the loader resolves the lock-callback promises the runtime registered,
// so the next tab leads although the dead tab stays open.
func TestDeadRuntimeReleasesItsLock(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		for _, how := range []string{"trap", "exit"} {
			t.Run(how, func(t *testing.T) {
				s := scope(t)
				dying := e.open("raw-locks.html", s+"-raw", 1, "waiting") // a page without the runtime
				require.Equal(t, "tabfence:"+s+":v1", eval[string](t, dying, `(async (s) => {
				await import("/dist/wasm_exec.js");
				const Base = globalThis.Go;
				globalThis.Go = class extends Base { constructor() { super(); globalThis.__go = this; } };
				const m = await import("/dist/tabfence.js");
				const tf = await m.load({ wasmURL: "/dist/tabfence.wasm" });
				return await new Promise((ok) => { window.EL = tf.elect({ scope: s, protocol: 1, onLeader: (c) => ok(c.lockName) }); });
			})(`+jsStr(s)+`)`), "dying tab led")
				next := e.demo(s, 1, "follower")
				eval[any](t, dying, `(async (how) => {
				if (how === "trap") {
					__go._inst = { exports: { resume() { throw new WebAssembly.RuntimeError("simulated trap"); } } };
					await EL.hasLeader().catch(() => null); // Go's next wake-up traps
				} else {
					__go.exit(2);
				}
				return null;
			})(`+jsStr(how)+`)`)
				_, err := next.WaitEvent("leader", 1, failoverTimeout)
				require.NoError(t, err, "the next tab never led after the leader's runtime died")
				n := eval[float64](t, dying, `globalThis.__tabfence_v1_locks.size`)
				require.Equal(t, float64(0), n, "%v locks still registered", n)
			})
		}
	})
}

// A newer build opening the database at a higher version is told apart
// from a delete: the leader of the old build gets onLost("upgraded"),
// releases the lock, and the new build's open is not blocked.
func TestFenceDatabaseUpgradedToldApart(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupFence(t, k)
		s, r := scope(t), "upg-"+scope(t)
		old := e.fencedTab(s, r)
		waitF(t, old, "leader", 1)
		newer := e.runtimeTab()
		tok := eval[float64](t, newer, `tabfenceDemo.tf.fence(`+jsStr(r)+`, { version: 2, stores: ["notes", "tags"] }).allocate()`)
		require.GreaterOrEqual(t, tok, float64(2), "token %v after the upgrade, want above the old leader's", tok)
		lost := waitF(t, old, "lost", 1)
		require.Equal(t, "upgraded", lost.Reason, "old build lost with %q (%s)", lost.Reason, lost.Message)
		require.Equal(t, "DatabaseUpgradedError", eval[string](t, old, `T.fence.allocate().then(String, (e) => e.name)`), "old build's fence after the upgrade")
	})
}
