//go:build e2e

package e2e

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// A page whose Content-Security-Policy allows WebAssembly but not eval
// ('wasm-unsafe-eval' without 'unsafe-eval') runs the whole runtime: the
// JavaScript halves the Go code builds with the Function constructor
// (the freeze tracker of transactions in package idb, the outbox's packed
// record reader)
// are refused, as the violation reports show, and every call
// takes its Go path instead, with the same results.
func TestStrictCSPPage(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		const policy = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'"
		e := setupServing(t, k, func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/test/csp.html":
					w.Header().Set("Content-Security-Policy", policy)
					w.Header().Set("Content-Type", "text/html; charset=utf-8")
					w.Write([]byte(`<!doctype html><title>csp</title><script type="module" src="/test/csp.js"></script>`))
				case "/test/csp.js":
					w.Header().Set("Content-Type", "text/javascript")
					w.Write([]byte(`window.violations = [];
document.addEventListener("securitypolicyviolation", (e) => violations.push(e.violatedDirective + " " + e.blockedURI));
window.cspReady = import("/dist/tabfence.js").then(({ load }) => load({ wasmURL: "/dist/tabfence.wasm" })).then((tf) => (window.tf = tf));`))
				default:
					next.ServeHTTP(w, r)
				}
			})
		})
		tab, err := e.b.Open(e.srv.URL + "/test/csp.html")
		require.NoError(t, err)
		t.Cleanup(tab.Close)

		got := eval[map[string]any](t, tab, `(async () => {
		const tf = await cspReady;
		const out = {};
		try { new Function("return 1"); out.evalRefused = false; } catch (e) { out.evalRefused = e instanceof EvalError; }
		let leader;
		const led = new Promise((res) => { leader = res; });
		const el = tf.elect({ scope: "csp", protocol: 1, resource: "csp-doc", stores: ["notes"], onLeader: (ctx) => leader(ctx) });
		const ctx = await led;
		out.leaderToken = ctx.token;
		const fence = tf.fence("csp-doc");
		out.allocated = [await fence.allocate(), await fence.allocate()];
		out.apply = await fence.apply({ token: out.allocated[1], operationID: "csp-1" }, [{ store: "notes", op: "put", key: "k", value: "v" }]);
		out.stale = await fence.apply({ token: ctx.token, operationID: "csp-2" }, [{ store: "notes", op: "put", key: "k", value: "old" }]);
		const ob = await tf.outbox({ name: "csp", endpoint: "/api/notes", user: "u", policies: { put: { dedupe: "append" } } });
		out.enqueued = typeof (await ob.enqueue({ operationType: "put", entityType: "note", entityId: "n1", payload: { text: "x" } })).id;
		await el.close();
		return out;
	})()`)
		want := map[string]any{"evalRefused": true, "leaderToken": 1.0, "apply": "accepted", "stale": "stale", "enqueued": "string"}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
			}
		}
		if a, ok := got["allocated"].([]any); !ok || len(a) != 2 || a[0] != 2.0 || a[1] != 3.0 {
			t.Errorf("allocated = %v, want [2 3]", got["allocated"])
		}
		// The runtime really tried the Function constructor and was refused:
		// package idb's freeze tracker at start, and the outbox's packed record
		// reader if it read a record by then (reports arrive as events, after
		// the calls). The fencing fast paths need no eval: they are the
		// loader's ES modules (idb/fast.js).
		n := eval[int](t, tab, `new Promise((res) => {
		const count = () => violations.filter((v) => v.startsWith("script-src") && v.endsWith(" eval")).length;
		const check = () => { if (count() >= 1) res(count()); };
		document.addEventListener("securitypolicyviolation", () => setTimeout(check));
		setTimeout(() => res(count()), 5000);
		check();
	})`)
		require.GreaterOrEqual(t, n, 1, "%d eval violations reported, want the freeze tracker's at least (all: %v)", n, eval[[]string](t, tab, `violations`))
	})
}
