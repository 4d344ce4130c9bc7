// core.js — what the loader's hook groups share: the runtime's wasm
// exports, the scratch in its memory, and calls that never unwind into Go.
// fastPath(groups) makes the object the loader installs for the runtime
// (jsglue/loader, Lookup): attach and payload, and one object per group
// (channel/fast.js, outbox/browser/append.js, wasm/api.js, idb/fast.js), each made by its
// factory from the core. The groups only reshape data and run what must
// run synchronously in a browser event; every decision is Go's.

export function fastPath(groups) {
  const enc = new TextEncoder(), dec = new TextDecoder();
  // ex: the instance's exports once attached (null before, and once the
  // runtime stopped or trapped). Exports take numbers only: text crosses
  // through xscratch, a buffer in the instance's memory whose address and
  // size Go gives once (tabfence_scratch, tabfence_scratch_len), asked for
  // on first use, which is always before a call into Go (never inside
  // one, where entering an export again is not allowed). The view is made
  // again when the memory grows, which detaches the old buffer.
  let ex = null, died = null, xmem = null, xaddr = -1, xlen = 0;
  const xscratch = () => {
    const b = ex.mem.buffer;
    if (xmem === null || xmem.buffer !== b) {
      if (xaddr < 0) {
        xaddr = ex.tabfence_scratch() >>> 0;
        xlen = ex.tabfence_scratch_len() >>> 0;
      }
      xmem = new Uint8Array(b, xaddr, xlen);
    }
    return xmem;
  };
  // text reads the text Go handed over as h: a string, its length in buf
  // (the scratch Uint8Array), or minus its length in xscratch.
  const text = (buf, h) =>
    typeof h !== "number" ? h : h < 0 ? dec.decode(xscratch().subarray(0, -h)) : dec.decode(buf.subarray(0, h));
  const report = (err) => {
    if (typeof reportError === "function") reportError(err);
    else setTimeout(() => { throw err; });
  };
  // later(f, m) calls f(m) in a microtask; an exception is reported as
  // uncaught and never unwinds into Go. A resolved promise's then, not
  // queueMicrotask, whose first call in a task costs far more (see
  // docs/fastpath.md).
  const resolved = Promise.resolve();
  const later = (f, m) => {
    resolved.then(() => {
      try {
        f(m);
      } catch (err) {
        report(err);
      }
    });
  };
  // held: the payload being handed to an export, which Go reads back with
  // payload(); env: the received envelope being handed over.
  let held, env;
  // enter calls an export through call, holding payload and envelope: a
  // trap inside it (the runtime is broken) detaches the exports and tells
  // the loader (died).
  const enter = (call, payload, envelope) => {
    held = payload;
    env = envelope;
    try {
      return call();
    } catch (err) {
      if (err instanceof WebAssembly.RuntimeError) {
        ex = null;
        died?.(err);
      }
      throw err;
    } finally {
      held = env = undefined;
    }
  };
  // capture runs call (a poster's export) and returns its result and the
  // first envelope a post sent meanwhile (sent), whose fields answer it.
  let capturing = false, captured = null;
  const capture = (call) => {
    capturing = true;
    let v;
    try {
      v = call();
    } finally {
      capturing = false;
    }
    const e = captured;
    captured = null;
    return [v, e];
  };
  const sent = (e) => {
    if (capturing && captured === null) captured = e;
  };
  const stops = [];
  const core = Object.freeze({
    enc, dec, xscratch, text, report, later, enter, capture, sent,
    exports: () => ex,
    envelope: () => env,
    onStop: (f) => stops.push(f),
  });
  const fast = {
    // attach hands over the runtime's exports once it is instantiated, and
    // null once it stopped: the exports of a stopped runtime are not
    // called, and the groups drop what they hold for it.
    attach(exports, onTrap) {
      if (exports === null) for (const f of stops) f();
      ex = typeof exports?.tabfence_scratch === "function" && typeof exports.tabfence_scratch_len === "function" &&
        exports.mem instanceof WebAssembly.Memory ? exports : null;
      xmem = null;
      xaddr = -1;
      died = ex !== null && typeof onTrap === "function" ? onTrap : null;
    },
    payload() {
      return held;
    },
  };
  for (const [name, make] of Object.entries(groups)) fast[name] = Object.freeze(make(core));
  return Object.freeze(fast);
}
