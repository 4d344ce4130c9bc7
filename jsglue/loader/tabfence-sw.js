// tabfence-sw.js — Background Sync for the tabfence outbox, in a module
// Service Worker (navigator.serviceWorker.register("/sw.js", {type: "module"}))
// or a worker bundle. Types are in tabfence-sw.d.ts.
//
//   import { backgroundSync } from "tabfence/sw"; // or "/dist/tabfence-sw.js"
//   import { notesOptions } from "./outbox-options.js"; // what the pages give tf.outbox
//   backgroundSync({ outboxes: [notesOptions] }); // at the top level of the worker
//
// Pages register the queue's sync tag after their enqueues; when the
// browser fires it (online again, possibly after every tab closed), this
// worker loads the runtime, opens the queue passive (tf.backgroundSync) and
// drains it with the tabs' own flush lock, lease and fencing tokens. The
// worker keeps no secret: credentials come from the options' headers hook
// at send time.
//
// A Service Worker cannot import() dynamically: wasm_exec.js (which defines
// globalThis.Go) is imported statically, so the loader never needs to.

import "./wasm_exec.js";
import { load } from "./tabfence.js";

/** The start of every tabfence sync tag (a queue's Web Lock name, checked against Go). */
const TAG_PREFIX = "tabfence:outbox-";
/** How many reports self.__tabfenceSync keeps (tests read them). */
const KEEP_REPORTS = 50;
/**
 * How long an event waits for the runtime to load and for each outbox to
 * open: a hung fetch or IndexedDB open fails that event (retried later)
 * instead of every later event of the worker's life.
 */
const OPEN_TIMEOUT_MS = 30000;

let called = false;
// The worker script's first evaluation ends before any task runs: a call
// from a later task (after an await, in an event) would add the sync
// listener too late to see the event that woke the worker.
let late = false;
setTimeout(() => {
  late = true;
}, 0);

/**
 * backgroundSync drains the configured outboxes on their sync events. Call
 * it once, synchronously, while the worker script first runs.
 */
export function backgroundSync(options) {
  if (typeof ServiceWorkerGlobalScope !== "function" || !(globalThis instanceof ServiceWorkerGlobalScope)) {
    throw new TypeError("tabfence/sw: backgroundSync runs in a Service Worker");
  }
  if (called) throw new TypeError("tabfence/sw: backgroundSync called twice");
  if (late) {
    throw new TypeError("tabfence/sw: call backgroundSync synchronously at the top level of the worker script");
  }
  const cfg = readOptions(options);
  called = true;
  if (cfg.cache !== false) {
    // Cleared when this version takes over, not at install: an install runs
    // beside the old version, which could cache again before it goes. From
    // activate on no old worker runs, so none caches for this one.
    globalThis.addEventListener("activate", (event) => {
      event.waitUntil(caches.delete(cfg.cache).catch(() => {}));
    });
  }
  globalThis.addEventListener("sync", (event) => {
    if (typeof event.tag !== "string" || !event.tag.startsWith(TAG_PREFIX)) return;
    event.waitUntil(onSync(cfg, event.tag, event.lastChance === true));
  });
}

function readOptions(options) {
  if (options === null || typeof options !== "object") throw new TypeError("tabfence/sw: options must be an object");
  const { outboxes, wasmURL, cache = "tabfence-runtime", lockWaitMs, onReport } = options;
  const list = Array.isArray(outboxes) ? outboxes : [outboxes];
  if (list.length === 0 || list.some((o) => o === null || typeof o !== "object")) {
    throw new TypeError("tabfence/sw: outboxes must be the outbox options (an object or an array of them)");
  }
  if (wasmURL !== undefined && typeof wasmURL !== "string" && !(wasmURL instanceof URL)) {
    throw new TypeError("tabfence/sw: wasmURL must be a string or URL");
  }
  if (cache !== false && (typeof cache !== "string" || cache === "")) {
    throw new TypeError("tabfence/sw: cache must be a cache name or false");
  }
  // Its range is checked by drain (one rule, in Go): a bad one is reported.
  if (lockWaitMs !== undefined && !Number.isFinite(lockWaitMs)) {
    throw new TypeError("tabfence/sw: lockWaitMs must be a number of milliseconds");
  }
  if (onReport !== undefined && typeof onReport !== "function") throw new TypeError("tabfence/sw: onReport must be a function");
  return { outboxes: list, wasmURL, cache, lockWaitMs, onReport, opened: new Array(list.length) };
}

// onSync handles one tabfence sync event: it rejects when the report says
// retry, so the browser tries again later.
async function onSync(cfg, tag, lastChance) {
  let report;
  let stage = "load"; // a TypeError of the load is the network's (fetch), retried
  try {
    const tf = await loadRuntime(cfg);
    stage = "open";
    const { outbox, failed } = await find(cfg, tf, tag);
    if (!outbox) {
      // Not ours (a page of another protocol registered it), unless an
      // outbox failed to open: then it may be, and the next event retries.
      if (!failed) return;
      throw failed;
    }
    report = await outbox.drain(cfg.lockWaitMs === undefined ? { lastChance } : { lastChance, timeoutMs: cfg.lockWaitMs });
  } catch (err) {
    report = failedReport(cfg, err, lastChance, stage === "open" && err?.name === "TypeError");
  }
  const out = { tag, lastChance, ...report };
  const kept = (globalThis.__tabfenceSync ??= []);
  kept.push({ ...out, at: Date.now() });
  if (kept.length > KEEP_REPORTS) kept.splice(0, kept.length - KEEP_REPORTS);
  if (cfg.onReport) {
    try {
      cfg.onReport(out);
    } catch (err) {
      console.error("tabfence/sw: onReport threw", err);
    }
  }
  if (out.retry) throw new Error(`tabfence/sw: sync ${tag}: ${out.reason}, retry later`);
}

// failedReport is the report of an event whose runtime did not load, whose
// queue did not open or whose drain rejected: nothing was sent. It is the
// JS side of Go's syncVerdict (outbox/browser) for what never reached Go:
// "error", retried unless it is the last chance or bad configuration (bad:
// a TypeError of tf.backgroundSync or drain, which a retry repeats).
function failedReport(cfg, err, lastChance, bad) {
  if (err?.name === "RuntimeExitedError") cfg.opened.fill(undefined); // the next event loads a new runtime
  if (bad) console.error("tabfence/sw: bad outbox options", err);
  return { acked: 0, retried: 0, deadLettered: 0, claimed: 0, terminal: 0, conflicts: 0, requests: 0, remaining: 0, retry: !lastChance && !bad, reason: "error", error: String(err) };
}

// loadRuntime is load with the worker's cached fetch, bounded by
// OPEN_TIMEOUT_MS. A module from the cache that fails to load is deleted
// there, so the next event fetches it again.
async function loadRuntime(cfg) {
  const fetchWasm = cachedFetch(cfg.cache);
  try {
    return await bounded(load(cfg.wasmURL === undefined ? { fetch: fetchWasm } : { wasmURL: cfg.wasmURL, fetch: fetchWasm }), "loading the runtime");
  } catch (err) {
    await fetchWasm.forget?.();
    throw err;
  }
}

// bounded rejects when p has not settled within OPEN_TIMEOUT_MS.
function bounded(p, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`tabfence/sw: ${what} took over ${OPEN_TIMEOUT_MS} ms`)), OPEN_TIMEOUT_MS);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

// find opens every configured outbox once per worker lifetime (a failed or
// timed-out open is tried again on the next event) and returns the one
// whose sync tag is tag.
async function find(cfg, tf, tag) {
  let failed = null;
  for (let i = 0; i < cfg.outboxes.length; i++) {
    const p = (cfg.opened[i] ??= tf.backgroundSync(cfg.outboxes[i]));
    let outbox;
    try {
      outbox = await bounded(p, "opening an outbox");
    } catch (err) {
      if (cfg.opened[i] === p) {
        cfg.opened[i] = undefined;
        // An open that ends after its timeout is closed, not leaked.
        p.then((o) => o.close()).catch(() => {});
      }
      if (err?.name === "RuntimeExitedError") throw err;
      failed ??= err;
      continue;
    }
    if (outbox.syncTag === tag) return { outbox, failed: null };
  }
  return { outbox: null, failed };
}

// cachedFetch is load's fetch: the worker's answers from the Cache API
// cache name, storing there only a network answer that is the module (ok,
// application/wasm); activate clears it. Its forget deletes an entry it
// answered from, once loading from it failed. fetch itself when cache is
// false or the Cache API is missing.
function cachedFetch(name) {
  if (name === false || typeof caches === "undefined") return fetch;
  let used = null; // the entry this load answered from or stored, once it is settled
  const f = async (url) => {
    const cache = await caches.open(name).catch(() => null);
    const hit = cache && (await cache.match(url).catch(() => undefined));
    if (hit) {
      used = Promise.resolve(url);
      return hit;
    }
    const res = await fetch(url);
    const type = (res.headers.get("Content-Type") ?? "").split(";")[0].trim();
    if (res.ok && type === "application/wasm" && cache) {
      used = cache.put(url, res.clone()).then(() => url, () => url);
    }
    return res;
  };
  f.forget = async () => {
    if (used === null) return;
    const url = await used;
    const cache = await caches.open(name).catch(() => null);
    await cache?.delete(url).catch(() => {});
  };
  return f;
}
