// tabfence.js — the ES module that loads the tabfence runtime (tabfence.wasm,
// Go compiled to WebAssembly) into a page or worker and returns its API.
//
//   import { load } from "tabfence"; // or "/dist/tabfence.js"
//   const tf = await load(); // tabfence.wasm beside this module, or { wasmURL }
//   const election = tf.elect({ scope: "notes", protocol: 1, onLeader(ctx) { … } });
//
// Why a loader and not the raw object: the Go program can neither throw a
// JavaScript exception (a panic would kill it) nor settle promises once it
// has died. This module turns the runtime's conventions into ordinary
// JavaScript behaviour: synchronous errors are thrown, and when the runtime
// exits or crashes every pending and later call rejects with a
// RuntimeExitedError instead of hanging. Types are in tabfence.d.ts.

import { fastPath } from "./tabfence-fast.js";
import { hooks as channel } from "./tabfence-channel.js";
import { hooks as outbox } from "./tabfence-outbox.js";
import { hooks as api } from "./tabfence-api.js";
import { hooks as idb } from "./tabfence-idb.js";

/** The global the runtime stores its raw API object under. */
const GLOBAL = "__tabfence_v1";
/** The global holding the runtime's registry of held Web Locks (see start). */
const LOCKS = GLOBAL + "_locks";

// Memoized on globalThis, not in this module: the loader may be imported
// twice under different URLs (a bundle and a CDN copy, `?v=2`), and there
// must still be one runtime per page — two would be two sets of tabs
// electing leaders.
const LOADING = Symbol.for("tabfence.load.v1");

// Markers set by the Go side (wasm/jsapi/jsapi_js.go).
const ASYNC = Symbol.for("tabfence.async"); // the function returns a promise
const THROW = Symbol.for("tabfence.throw"); // this returned Error must be thrown

// The runtime's fast path: hooks for the runtime's hot paths (a message,
// a post, an enqueue), each group beside the Go package it serves and
// composed by core.js (see jsglue/loader). Without them (Go's own tests, a
// page that loads the .wasm without this module) Go does it all itself.
const FASTPATH = Symbol.for("tabfence.fastpath.v2");
const FAST = fastPath({ channel, outbox, api, idb });

/**
 * RuntimeExitedError is the error of every call made, or still pending,
 * after the runtime stopped. Its `cause` is the exit code or the crash.
 */
export class RuntimeExitedError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = "RuntimeExitedError";
  }
}

/**
 * load starts the runtime once per page and resolves to its API. Later and
 * concurrent calls share the first call's promise; their options are
 * ignored. If loading fails, or the runtime exits (RuntimeExitedError), the
 * next call starts it again (a Service Worker lives on; a page reloads).
 */
export function load(options) {
  const pending = globalThis[LOADING];
  if (pending) return pending;
  const forget = () => {
    if (globalThis[LOADING] === p) delete globalThis[LOADING];
  };
  const p = start(options, forget);
  globalThis[LOADING] = p;
  p.catch(forget);
  return p;
}

async function start(options, onExit) {
  // The default module is found the way bundlers recognise (Vite emits the
  // file and rewrites the URL; unbundled, it is the file beside this one).
  const { wasmURL = new URL("./tabfence.wasm", import.meta.url), wasmExecURL, fetch: fetchWasm = fetch } = options ?? {};
  if (!wasmURL || (typeof wasmURL !== "string" && !(wasmURL instanceof URL))) {
    throw new TypeError("tabfence.load: wasmURL must be a string or URL");
  }
  if (typeof fetchWasm !== "function") {
    throw new TypeError("tabfence.load: fetch must be a function");
  }
  if (typeof globalThis.Go !== "function") {
    // wasm_exec.js is a classic script that defines globalThis.Go; a
    // dynamic import runs it in windows and workers alike. The literal
    // specifier lets a bundler include it (esbuild inlines it, Vite makes
    // it a chunk); a computed one would be looked up beside the bundle.
    await (wasmExecURL ? import(/* @vite-ignore */ String(wasmExecURL)) : import("./wasm_exec.js"));
    if (typeof globalThis.Go !== "function") {
      throw new Error("tabfence.load: wasm_exec.js did not define globalThis.Go");
    }
  }
  const go = new globalThis.Go();
  // The registry of held Web Locks: the runtime adds the resolve function
  // of every lock-callback promise it holds and removes it on release. If
  // the runtime dies holding one, watch() resolves them all, so the browser
  // gives the lock to the next tab instead of a dead runtime leading forever.
  const held = new Set();
  globalThis[LOCKS] = held;
  go.env = { ...go.env, TABFENCE_GLOBAL: GLOBAL, TABFENCE_LOCKS: LOCKS };
  const fast = (globalThis[FASTPATH] ??= FAST);

  const runtime = watch(go, held);
  runtime.onDie = () => {
    fast.attach?.(null);
    onExit();
  };
  const ready = new Promise((resolve) => {
    globalThis[GLOBAL + "_ready"] = resolve;
  });
  try {
    const instance = await instantiate(fetchWasm, wasmURL, go.importObject);
    fast.attach?.(instance.exports, (err) => runtime.die(new RuntimeExitedError("tabfence: the runtime crashed; reload the page", { cause: err })));
    go.run(instance).then(
      () => runtime.die(new RuntimeExitedError(`tabfence: the runtime exited (code ${runtime.code ?? "unknown"}); reload the page`, { cause: runtime.code })),
      (err) => runtime.die(new RuntimeExitedError("tabfence: the runtime crashed; reload the page", { cause: err })),
    );
    const raw = await Promise.race([ready, runtime.dead]);
    return guard(raw, runtime);
  } finally {
    delete globalThis[GLOBAL + "_ready"];
  }
}

// instantiate compiles while downloading when the server sends the right
// MIME type, and falls back to a buffer when it does not (a common
// misconfiguration that instantiateStreaming rejects with a TypeError).
// fetchWasm is the load option (a worker answers from its Cache API cache).
async function instantiate(fetchWasm, url, imports) {
  const res = await fetchWasm(url);
  if (!res.ok) {
    res.body?.cancel().catch(() => {}); // the error page is not read: let the connection go
    throw new Error(`tabfence.load: fetching ${url} failed: ${res.status} ${res.statusText}`);
  }
  const type = res.headers.get("Content-Type") ?? "";
  if (typeof WebAssembly.instantiateStreaming === "function" && type.split(";")[0].trim() === "application/wasm") {
    return (await WebAssembly.instantiateStreaming(res, imports)).instance;
  }
  return (await WebAssembly.instantiate(await res.arrayBuffer(), imports)).instance;
}

// watch notices when the Go program stops: a normal exit or panic goes
// through go.exit; a WebAssembly trap surfaces as an exception from
// go._resume (the entry point of every callback into Go), after which the
// runtime is unusable even though it never "exited".
function watch(go, held) {
  // pending: the reject functions of the calls in flight (settle), which
  // die rejects. Not a Promise.race with runtime.dead per call: every race
  // leaves a reaction on that promise, which stays pending while the
  // runtime lives, so each call would keep about 125 bytes for the page's
  // lifetime (TestSettledCallsLeaveNothing).
  const runtime = { error: null, code: undefined, pending: new Set() };
  runtime.dead = new Promise((_, reject) => {
    runtime.die = (err) => {
      if (runtime.error) return;
      runtime.error = err;
      runtime.onDie?.();
      // Release every Web Lock the dead runtime held.
      for (const release of held) {
        try {
          release();
        } catch {}
      }
      held.clear();
      for (const fail of runtime.pending) fail(err);
      runtime.pending.clear();
      reject(err);
    };
  });
  runtime.dead.catch(() => {}); // raced once, by start; never unhandled

  const exit = go.exit;
  go.exit = (code) => {
    runtime.code = code;
    exit.call(go, code);
    runtime.die(new RuntimeExitedError(`tabfence: the runtime exited (code ${code}); reload the page`, { cause: code }));
  };
  const resume = go._resume;
  if (typeof resume === "function") {
    go._resume = function () {
      try {
        return resume.call(this);
      } catch (err) {
        if (err instanceof WebAssembly.RuntimeError) {
          runtime.die(new RuntimeExitedError("tabfence: the runtime crashed; reload the page", { cause: err }));
        }
        throw err;
      }
    };
  }
  return runtime;
}

// guard wraps a raw object of the runtime (the API, an election) in a plain
// object that forwards every method and getter by name at call time and
// applies the conventions above. Objects without methods (a leader context)
// are data and pass through unchanged.
function guard(raw, runtime, seen = new WeakMap()) {
  if (!isHandle(raw)) return raw;
  if (seen.has(raw)) return seen.get(raw);
  const out = {};
  seen.set(raw, out);
  const wrap = (v) => guard(v, runtime, seen);
  for (const [key, desc] of Object.entries(Object.getOwnPropertyDescriptors(raw))) {
    if (desc.get) {
      Object.defineProperty(out, key, {
        enumerable: true,
        get() {
          if (runtime.error) throw runtime.error;
          return wrap(unwrapThrow(call(runtime, () => raw[key])));
        },
      });
    } else if (typeof desc.value === "function") {
      const isAsync = desc.value[ASYNC] === true;
      Object.defineProperty(out, key, {
        enumerable: true,
        value: isAsync
          ? function (...args) {
              if (runtime.error) return Promise.reject(runtime.error);
              let p;
              try {
                p = call(runtime, () => raw[key](...args));
              } catch (err) {
                return Promise.reject(err);
              }
              return settle(runtime, p, wrap);
            }
          : function (...args) {
              if (runtime.error) throw runtime.error;
              return wrap(unwrapThrow(call(runtime, () => raw[key](...args))));
            },
      });
    } else {
      Object.defineProperty(out, key, { enumerable: true, value: desc.value });
    }
  }
  return Object.freeze(out);
}

// settle is p, its value passed through wrap, or the runtime's error if
// the runtime dies first.
function settle(runtime, p, wrap) {
  return new Promise((resolve, reject) => {
    runtime.pending.add(reject);
    Promise.resolve(p).then(
      (v) => {
        runtime.pending.delete(reject);
        try {
          resolve(wrap(v));
        } catch (err) {
          reject(err);
        }
      },
      (err) => {
        runtime.pending.delete(reject);
        reject(err);
      },
    );
  });
}

function isHandle(v) {
  if (v === null || typeof v !== "object" || v instanceof Error || typeof v.then === "function") return false;
  return Object.values(Object.getOwnPropertyDescriptors(v)).some((d) => d.get || typeof d.value === "function");
}

// call runs fn, turning "Go program has already exited" (thrown by
// wasm_exec.js when a call races the exit) into the runtime's error.
function call(runtime, fn) {
  try {
    return fn();
  } catch (err) {
    throw runtime.error ?? err;
  }
}

function unwrapThrow(v) {
  if (v instanceof Error && v[THROW] === true) throw v;
  return v;
}
