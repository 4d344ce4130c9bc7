package browserbench

import (
	"github.com/tabfence/tabfence/e2e/harness"
)

// disableCache makes every request of the tab go to the server, as a first
// visit does (and keeps Chromium from serving cached compiled wasm).
func disableCache(t *harness.Tab) error { return t.BypassCache(true) }

// grantProbe wraps navigator.locks.request before any page script runs and
// stores, per lock name, when the browser last granted that lock to this
// page (a callback called with a lock, not the null of a failed
// ifAvailable probe): per name, since the runtime takes other locks right
// after it leads, in an order that differs between browsers. The
// difference to the page's onLeader timestamp is what the runtime itself
// adds to a failover; the rest is the browser's.
const grantProbe = `(() => {
	const locks = navigator.locks;
	if (!locks) return;
	const request = locks.request.bind(locks);
	locks.request = (name, options, callback) => {
		if (typeof options === "function") { callback = options; options = {}; }
		return request(name, options, (lock) => {
			if (lock) (window.__tabfenceBenchGrants ??= {})[name] = performance.timeOrigin + performance.now();
			return callback(lock);
		});
	};
})();`

func installGrantProbe(t *harness.Tab) error { return t.AddInitScript(grantProbe) }
