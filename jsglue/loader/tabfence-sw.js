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
    // A new worker version never runs the module an older one cached.
    globalThis.addEventListener("install", (event) => {
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
  if (lockWaitMs !== undefined && !(typeof lockWaitMs === "number" && lockWaitMs >= 1)) {
    throw new TypeError("tabfence/sw: lockWaitMs must be a number of milliseconds >= 1");
  }
  if (onReport !== undefined && typeof onReport !== "function") throw new TypeError("tabfence/sw: onReport must be a function");
  return { outboxes: list, wasmURL, cache, lockWaitMs, onReport, opened: new Array(list.length) };
}

// onSync handles one tabfence sync event: it rejects when the report says
// retry, so the browser tries again later.
async function onSync(cfg, tag, lastChance) {
  let report;
  try {
    const tf = await load(cfg.wasmURL === undefined ? { fetch: cachedFetch(cfg.cache) } : { wasmURL: cfg.wasmURL, fetch: cachedFetch(cfg.cache) });
    const { outbox, failed } = await find(cfg, tf, tag);
    if (!outbox) {
      // Not ours (a page of another protocol registered it), unless an
      // outbox failed to open: then it may be, and the next event retries.
      if (!failed) return;
      throw failed;
    }
    report = await outbox.drain(cfg.lockWaitMs === undefined ? { lastChance } : { lastChance, timeoutMs: cfg.lockWaitMs });
  } catch (err) {
    // The runtime did not load or the queue did not open: nothing was sent.
    report = { acked: 0, retried: 0, deadLettered: 0, claimed: 0, remaining: 0, retry: !lastChance, reason: "error", error: String(err) };
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

// find opens every configured outbox once per worker lifetime (a failed
// open is tried again on the next event) and returns the one whose sync
// tag is tag.
async function find(cfg, tf, tag) {
  let failed = null;
  for (let i = 0; i < cfg.outboxes.length; i++) {
    cfg.opened[i] ??= tf.backgroundSync(cfg.outboxes[i]);
    let outbox;
    try {
      outbox = await cfg.opened[i];
    } catch (err) {
      cfg.opened[i] = undefined;
      failed ??= err;
      continue;
    }
    if (outbox.syncTag === tag) return { outbox, failed: null };
  }
  return { outbox: null, failed };
}

// cachedFetch is load's fetch: the worker's answers from the Cache API
// cache name, storing a network answer there (install clears it); fetch
// itself when cache is false or the Cache API fails.
function cachedFetch(name) {
  if (name === false || typeof caches === "undefined") return fetch;
  return async (url) => {
    const cache = await caches.open(name).catch(() => null);
    const hit = cache && (await cache.match(url).catch(() => undefined));
    if (hit) return hit;
    const res = await fetch(url);
    if (res.ok && cache) cache.put(url, res.clone()).catch(() => {});
    return res;
  };
}
