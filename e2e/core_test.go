//go:build e2e

package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// tabfence-core.wasm is the runtime without the outbox. An app loading it
// elects and fences as usual, and tf.outbox says plainly that it is absent.
func TestCoreBuildElectsAndRefusesOutbox(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setup(t, k, false)
		tab := e.open("raw-locks.html", scope(t), 1, "waiting") // a page without the runtime
		got := eval[map[string]string](t, tab, `(async () => {
		const m = await import("/dist/tabfence.js");
		const tf = await m.load({ wasmURL: "/dist/tabfence-core.wasm" });
		const out = {};
		const led = new Promise((resolve) => tf.elect({ scope: "core-" + Math.random(), protocol: 1, onLeader: (ctx) => resolve(ctx.lockName) }));
		out.leader = (await led).startsWith("tabfence:core-") ? "yes" : "no";
		try { await tf.outbox({ name: "q", endpoint: "/api/notes", user: "u", policies: { put: { dedupe: "append" } } }); out.outbox = "resolved"; }
		catch (err) { out.outbox = err.name; }
		return out;
	})()`)
		require.Equal(t, "yes", got["leader"], "core build: %v", got)
		require.Equal(t, "NotSupportedError", got["outbox"], "core build: %v", got)
	})
}
