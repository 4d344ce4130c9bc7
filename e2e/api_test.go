//go:build e2e

package e2e

import (
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// Loading twice in one page — sequentially, concurrently, and through a
// second copy of the loader module — returns the one instance the demo
// already loaded.
func TestLoadTwiceReturnsSameInstance(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		tab := e.demo(scope(t), 1, "leader")
		got := eval[map[string]bool](t, tab, `(async () => {
		const wasmURL = "/dist/tabfence.wasm";
		const m = await import("/dist/tabfence.js");
		const copy = await import("/dist/tabfence.js?copy=2"); // another module instance
		const [a, b] = await Promise.all([m.load({ wasmURL }), m.load({ wasmURL })]);
		const c = await copy.load({ wasmURL });
		const d = await m.load(); // options of later calls are ignored
		return { sameConcurrent: a === b, sameCopy: a === c, sameDemo: a === tabfenceDemo.tf,
			sameNoOptions: a === d, oneGo: typeof globalThis.Go === "function", distinctModules: m !== copy };
	})()`)
		for k, v := range got {
			assert.True(t, v, "%s is false", k)
		}
		require.Len(t, got, 6, "%v", got)
	})
}

// Misuse from JavaScript is a thrown TypeError or a rejected promise with a
// named Error, never a Go panic: the runtime keeps working afterwards.
func TestAPIErrorsAreNamed(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		tab := e.demo(scope(t), 1, "leader")
		got := eval[map[string]string](t, tab, `(async () => {
		const tf = tabfenceDemo.tf;
		const out = {};
		const sync = (k, f) => { try { f(); out[k] = "no error"; } catch (err) { out[k] = err.name + ": " + err.message; } };
		const async_ = async (k, f) => { try { await f(); out[k] = "resolved"; } catch (err) { out[k] = err.name + ": " + err.message; } };
		sync("noOptions", () => tf.elect());
		sync("missingScope", () => tf.elect({ protocol: 1 }));
		sync("emptyScope", () => tf.elect({ scope: "", protocol: 1 }));
		sync("protocolZero", () => tf.elect({ scope: "x", protocol: 0 }));
		sync("protocolString", () => tf.elect({ scope: "x", protocol: "2" }));
		sync("protocolFraction", () => tf.elect({ scope: "x", protocol: 1.5 }));
		sync("protocolBigInt", () => tf.elect({ scope: "x", protocol: 1n }));
		sync("onLeaderNotFunction", () => tf.elect({ scope: "x", protocol: 1, onLeader: 5 }));
		sync("controlCharScope", () => tf.elect({ scope: "a\nb", protocol: 1 }));
		sync("lockNameBad", () => tf.lockName("x", -1));
		sync("throwingGetter", () => tf.elect({ get scope() { throw new Error("boom"); }, protocol: 1 }));
		sync("bigintOptions", () => tf.elect(5n));
		out.lockName = tf.lockName("x", 3);
		const e = tf.elect({ scope: "api-errors", protocol: 1 });
		await e.close();
		await async_("closeTwice", () => e.close());
		await async_("resignClosed", () => e.resign());
		await async_("stealClosed", () => e.steal());
		await async_("hasLeaderClosed", () => e.hasLeader());
		out.isLeaderClosed = String(e.isLeader);
		out.leadershipClosed = String(e.leadership);
		const ok = tf.elect({ scope: "api-errors-2", protocol: 1 });
		out.alive = String(await ok.hasLeader() !== undefined && ok.lockName === "tabfence:api-errors-2:v1");
		await ok.close();
		return out;
	})()`)
		want := map[string]string{
			"noOptions":           "TypeError: tabfence.elect: expects an options object {scope, protocol, onLeader, onFollower, onLost}, got undefined",
			"missingScope":        "TypeError: tabfence.elect: scope must be a non-empty string, got undefined",
			"emptyScope":          "TypeError: tabfence.elect: scope must not be empty",
			"protocolZero":        "TypeError: tabfence.elect: protocol must be an integer from 1 to 2147483647, got 0",
			"protocolString":      "TypeError: tabfence.elect: protocol must be a positive integer number, got string",
			"protocolFraction":    "TypeError: tabfence.elect: protocol must be an integer from 1 to 2147483647, got 1.5",
			"protocolBigInt":      "TypeError: tabfence.elect: protocol must be a positive integer number, got bigint",
			"onLeaderNotFunction": "TypeError: tabfence.elect: onLeader must be a function when given, got number",
			"controlCharScope":    `TypeError: tabfence.elect: scope "a\nb" cannot name a lock: locks: invalid lock name: control character in scope at byte 1`,
			"lockNameBad":         "TypeError: tabfence.lockName: protocol must be an integer from 1 to 2147483647, got -1",
			"lockName":            "tabfence:x:v3",
			"throwingGetter":      "TypeError: tabfence.elect: scope must be a non-empty string, got undefined",
			"bigintOptions":       "TypeError: tabfence.elect: expects an options object {scope, protocol, onLeader, onFollower, onLost}, got bigint",
			"closeTwice":          "resolved",
			"resignClosed":        "InvalidStateError: locks: election closed",
			"stealClosed":         "InvalidStateError: locks: election closed",
			"hasLeaderClosed":     "InvalidStateError: locks: election closed",
			"isLeaderClosed":      "false",
			"leadershipClosed":    "null",
			"alive":               "true",
		}
		for k, w := range want {
			assert.Equal(t, w, got[k], "%s", k)
		}
	})
}

// load itself: a missing wasm file, a bad URL or fetch option reject, are
// not memoized, and a later call without a URL loads tabfence.wasm from
// beside the loader, through the fetch option when given.
func TestLoadErrors(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		tab := e.open("raw-locks.html", scope(t), 1, "waiting") // a page without the runtime
		got := eval[map[string]string](t, tab, `(async () => {
		const m = await import("/dist/tabfence.js");
		const out = {};
		const try_ = async (k, f) => { try { await f(); out[k] = "resolved"; } catch (err) { out[k] = err.name + ": " + err.message; } };
		await try_("badURL", () => m.load({ wasmURL: 42 }));
		await try_("missingWasm", () => m.load({ wasmURL: "/dist/missing.wasm" }));
		await try_("badFetch", () => m.load({ fetch: "cache" }));
		// The fetch option fetches the module (a worker's from its cache).
		const fetched = [];
		const tf = await m.load({ fetch: (url) => (fetched.push(new URL(url).pathname), fetch(url)) });
		out.fetched = fetched.join(",");
		out.afterFailures = tf.lockName("s", 1);
		// A resource's timing entry is queued when its response ends, which
		// for the refused fetch can come after load() rejected: wait for it.
		const wasms = () => performance.getEntriesByType("resource").map((e) => new URL(e.name).pathname).filter((p) => p.endsWith(".wasm"));
		for (let i = 0; i < 100 && wasms().length < 2; i++) await new Promise((r) => setTimeout(r, 50));
		out.wasm = wasms().join(",");
		return out;
	})()`)
		want := map[string]string{
			"badURL":        "TypeError: tabfence.load: wasmURL must be a string or URL",
			"missingWasm":   "Error: tabfence.load: fetching /dist/missing.wasm failed: 404 Not Found",
			"badFetch":      "TypeError: tabfence.load: fetch must be a function",
			"fetched":       "/dist/tabfence.wasm",
			"afterFailures": "tabfence:s:v1",
			"wasm":          "/dist/missing.wasm,/dist/tabfence.wasm",
		}
		for k, w := range want {
			assert.Equal(t, w, got[k], "%s", k)
		}
	})
}

// When the runtime dies, calls pending at that moment and every later call
// reject with RuntimeExitedError instead of hanging. Two ways to die are
// simulated through wasm_exec.js's own hooks: a trap inside Go (the way a
// WebAssembly RuntimeError surfaces) and an exit (what a Go panic does).
func TestRuntimeDeathRejectsCalls(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		for _, how := range []string{"trap", "exit"} {
			t.Run(how, func(t *testing.T) {
				tab := e.open("raw-locks.html", scope(t), 1, "waiting")
				got := eval[map[string]string](t, tab, `(async (how) => {
				await import("/dist/wasm_exec.js");
				const Base = globalThis.Go;
				globalThis.Go = class extends Base { constructor() { super(); globalThis.__go = this; } };
				const m = await import("/dist/tabfence.js");
				const tf = await m.load({ wasmURL: "/dist/tabfence.wasm" });
				const el = tf.elect({ scope: "death-" + how, protocol: 1 });
				const out = {};
				const name = (p) => p.then(() => "resolved", (err) => err.name + (err instanceof m.RuntimeExitedError ? " (instance)" : ""));
				if (how === "trap") {
					// Go's next wake-up traps; hasLeader is pending on navigator.locks.query meanwhile.
					__go._inst = { exports: { resume() { throw new WebAssembly.RuntimeError("simulated trap"); } } };
					out.pending = await name(el.hasLeader());
				} else {
					const pending = el.hasLeader(); // in flight when the program exits
					__go.exit(2);
					out.pending = await name(pending);
				}
				out.later = await name(el.resign());
				try { el.isLeader; out.getter = "no error"; } catch (err) { out.getter = err.name; }
				try { tf.lockName("x", 1); out.sync = "no error"; } catch (err) { out.sync = err.name; }
				out.elect = await name(Promise.resolve().then(() => tf.elect({ scope: "x", protocol: 1 })));
				return out;
			})(`+"`"+how+"`"+`)`)
				want := map[string]string{
					"pending": "RuntimeExitedError (instance)",
					"later":   "RuntimeExitedError (instance)",
					"getter":  "RuntimeExitedError",
					"sync":    "RuntimeExitedError",
					"elect":   "RuntimeExitedError (instance)",
				}
				for k, w := range want {
					assert.Equal(t, w, got[k], "%s", k)
				}
			})
		}
	})
}

// Settled calls leave nothing behind: 80,000 awaited calls grow the heap
// by less than 6 MB once collected. Racing every call against the
// runtime's death, as the loader did, left a reaction on that promise per
// call for the page's lifetime (125 bytes a call: the heap grew by 12 MB
// here). What it still grows by is what Go's syscall/js keeps referenced
// until Go's own collector runs (2.3 MB here; 1-3 MB after 20,000 to
// 80,000 calls of hasLeader, not growing with the number of calls). CDP's
// collectGarbage runs a full collection before each reading.
func TestSettledCallsLeaveNothing(t *testing.T) {
	chromiumOnly(t, "measures the JS heap: Runtime.getHeapUsage and HeapProfiler.collectGarbage are CDP-only", func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		tab := e.demo(scope(t), 1, "leader")
		// close() of a closed election: an async call into Go that does no I/O.
		calls := `(async (n) => {
		if (!globalThis.__el) { globalThis.__el = tabfenceDemo.tf.elect({ scope: "kept", protocol: 1 }); await __el.close(); }
		for (let i = 0; i < n; i++) await __el.close();
		return true;
	})`
		eval[bool](t, tab, calls+`(200)`)
		used := func() float64 {
			t.Helper()
			ctx, err := tab.CDP()
			require.NoError(t, err)
			_, err = chromedp.Call(ctx, heapprofiler.CollectGarbage, cdp.Empty{})
			require.NoError(t, err)
			u, err := chromedp.Call(ctx, cdpruntime.GetHeapUsage, cdp.Empty{})
			require.NoError(t, err)
			return u.UsedSize
		}
		before := used()
		// In evaluations of 10,000 calls: one evaluation of 80,000 outlasted
		// the harness's evaluation timeout on a busy machine.
		for i := 0; i < 8; i++ {
			eval[bool](t, tab, calls+`(10000)`)
		}
		grown := used() - before
		t.Logf("the heap grew by %.0f bytes over 80,000 calls", grown)
		require.LessOrEqual(t, grown, float64(6<<20), "the heap grew by %.0f bytes over 80,000 settled calls", grown)
	})
}
