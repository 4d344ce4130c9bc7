package channel

// loaderFastPath is the loader's FAST object (jsglue/loader/tabfence.js),
// which the browser tests install to run the channel through it, as pages
// do. TestLoaderFastPathInSync keeps the copy exact.
const loaderFastPath = `(() => {
  // Go hands every channel a scratch Uint8Array (buf): a header or message
  // written there crosses as its length, a number, which costs no
  // reference; one that does not fit crosses as a string.
  const enc = new TextEncoder(), dec = new TextDecoder();
  // With exports, text also crosses through xscratch, a buffer in the
  // instance's memory that Go names once (tabfence_scratch): JavaScript
  // writes and reads it in place, and Go reads and writes it without a call
  // (a crossing each way saved). The view is made again when the memory
  // grows, which detaches the old buffer. Go passes its text there as a
  // negative length. Its address is asked for on the first use, which is
  // always rx's or poster's, before they call Go: text() runs inside Go's
  // calls, where entering an export again is not allowed.
  let xmem = null, xaddr = -1;
  const hex8 = (x) => (x >>> 0).toString(16).padStart(8, "0");
  const xscratch = (n) => {
    const b = ex.mem.buffer;
    if (xmem === null || xmem.buffer !== b) {
      if (xaddr < 0) xaddr = ex.tabfence_scratch() >>> 0;
      xmem = new Uint8Array(b, xaddr, n);
    }
    return xmem;
  };
  const text = (buf, h) =>
    typeof h !== "number" ? h : h < 0 ? dec.decode(xscratch(buf.length).subarray(0, -h)) : dec.decode(buf.subarray(0, h));
  // later(f, m) calls f(m) in a microtask; an exception is reported as
  // uncaught, as queueMicrotask reports it, and never unwinds into Go. Not
  // queueMicrotask itself: measured in Chromium 156 here, its first call in
  // a task costs about 65 µs (p50; 0 µs for the next ones), a resolved
  // promise's then about 5 µs, and a message handler's delivery is such a
  // first call. Both land in the same microtask queue, in order.
  const resolved = Promise.resolve();
  const report = (err) => {
    if (typeof reportError === "function") reportError(err);
    else setTimeout(() => { throw err; });
  };
  const later = (f, m) => {
    resolved.then(() => {
      try {
        f(m);
      } catch (err) {
        report(err);
      }
    });
  };
  // ex: the instance's exports once attached. A call through a wasm export
  // skips a js.Func's event machinery (tens of µs per call); exports take
  // numbers only, so the payload being handed over waits in held, which Go
  // reads back with payload(), and a received envelope in env, which
  // deliverHeld reads. An export's result has bit 0 set when
  // goroutines wait to run: kick (a js.Func) lets them run in a microtask
  // (later).
  // A trap inside an export (the runtime is broken) detaches the exports
  // and tells the loader (died), as a trap inside a js.Func does (watch).
  let ex = null, held, env, died = null;
  // posting: a poster's export is running; posted: the envelope post()
  // sent meanwhile, whose fields answer the poster.
  let posting = false, posted = null;
  const handOver = (payload, call, envelope) => {
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
  return Object.freeze({
    // attach hands over the runtime's exports once it is instantiated, and
    // null once it stopped: the exports of a stopped runtime are not called.
    attach(exports, onTrap) {
      ex = typeof exports?.tabfence_channel_rx2 === "function" && typeof exports.tabfence_scratch === "function" &&
        exports.mem instanceof WebAssembly.Memory ? exports : null;
      xmem = null;
      xaddr = -1;
      died = ex !== null && typeof onTrap === "function" ? onTrap : null;
    },
    payload() {
      return held;
    },
    // rx wraps a channel's Go handler: a message that is plainly a tabfence
    // envelope (these types, strings within the bounds) reaches Go as
    // (JSON header [id, kind, resource, owner, token, seq, sentAt], payload),
    // the header in buf (its length) or as a string; anything else as
    // (undefined, data), for Go to decode and count. With exports, a header
    // that fits xscratch goes to the export instead, naming the channel by
    // id.
    rx(go, maxID, maxKind, maxResource, maxOwner, buf, id, kick) {
      return (ev) => {
        const d = ev?.data;
        if (typeof d === "object" && d !== null && d.protocol === "tabfence" && d.version === 1 &&
            typeof d.id === "string" && d.id.length <= maxID && typeof d.kind === "string" && d.kind.length <= maxKind &&
            typeof d.resource === "string" && d.resource.length <= maxResource &&
            typeof d.owner === "string" && d.owner.length <= maxOwner &&
            typeof d.token === "number" && typeof d.seq === "number" && typeof d.sentAt === "number") {
          const h = JSON.stringify([d.id, d.kind, d.resource, d.owner, d.token, d.seq, d.sentAt]);
          if (buf && ex !== null && id > 0) {
            const x = enc.encodeInto(h, xscratch(buf.length));
            if (x.read === h.length) {
              if (handOver(d.payload, () => ex.tabfence_channel_rx2(id, x.written), d) & 1) later(kick);
              return;
            }
          }
          const r = buf ? enc.encodeInto(h, buf) : null;
          return go(r !== null && r.read === h.length ? r.written : h, d.payload);
        }
        return go(undefined, d);
      };
    },
    // poster returns a post(kind, payload) method of the API: with exports,
    // a string kind that fits xscratch goes to the export tabfence_post with
    // (op, id); the export's verdict, bits 1 and up: 1 posted through post()
    // below, and the result, {id, token, seq}, is read from the envelope it
    // sent (posted); > 1 the length of the result as JSON in buf; < 0 failed
    // (fail() returns the rejected promise); 0 not taken (slow does it all).
    poster(op, id, slow, fail, buf, kick) {
      return (kind, payload) => {
        if (ex !== null && typeof kind === "string") {
          const r = enc.encodeInto(kind, xscratch(buf.length));
          if (r.read === kind.length) {
            let v;
            posting = true;
            try {
              v = handOver(payload, () => ex.tabfence_post(op, id, r.written));
            } finally {
              posting = false;
            }
            const e = posted;
            posted = null;
            if (v & 1) later(kick);
            const n = v >> 1;
            if (n === 1) return e !== null ? Promise.resolve({ id: e.id, token: e.token, seq: e.seq }) : fail();
            if (n > 1) return Promise.resolve(JSON.parse(dec.decode(buf.subarray(0, n))));
            if (n < 0) return fail();
          }
        }
        return slow(kind, payload);
      };
    },
    // post sends the envelope whose header Go wrote as JSON (in buf, or h).
    post(bc, buf, h, payload) {
      const e = JSON.parse(text(buf, h));
      if (payload !== undefined) e.payload = payload;
      bc.postMessage(e);
      if (posting && posted === null) posted = e;
    },
    // post2 is post for an envelope whose ID is 32 hex digits, handed over
    // as four 32-bit words, and whose other fields come as values (the
    // strings made once by Go): no JSON text decoded and parsed per post.
    post2(bc, kind, resource, owner, a, b, c, d, token, seq, sentAt, payload) {
      const e = { protocol: "tabfence", version: 1, id: hex8(a) + hex8(b) + hex8(c) + hex8(d), kind, resource, owner, token, seq, sentAt };
      if (payload !== undefined) e.payload = payload;
      bc.postMessage(e);
      if (posting && posted === null) posted = e;
    },
    // deliver hands a subscriber its message (fields as JSON in buf or h,
    // payload set in its place) in a microtask (later), so its exceptions
    // never unwind into Go.
    deliver(fn, buf, h, payload) {
      const m = JSON.parse(text(buf, h));
      m.payload = payload;
      later(fn, m);
    },
    // deliverHeld is deliver for the envelope being handed to
    // tabfence_channel_rx2 (env), which Go accepted and found plain (no
    // escape in its header: every string is exactly the one received): the
    // message is built from it, in deliver's field order, instead of from
    // JSON. Numbers + 0: -0 arrives as 0, as through JSON.
    deliverHeld(fn, gap) {
      const d = env;
      later(fn, { id: d.id, kind: d.kind, payload: d.payload, token: d.token + 0, seq: d.seq + 0,
        resource: d.resource, owner: d.owner, sentAt: d.sentAt + 0, gap: gap === true });
    },
  });
})();`
