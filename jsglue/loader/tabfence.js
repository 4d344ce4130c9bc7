// tabfence.js — the ES module that loads the tabfence runtime (tabfence.wasm,
// Go compiled to WebAssembly) into a page or worker and returns its API.
//
//   import { load } from "/dist/tabfence.js";
//   const tf = await load({ wasmURL: "/dist/tabfence.wasm" });
//   const election = tf.elect({ scope: "notes", protocol: 1, onLeader(ctx) { … } });
//
// Why a loader and not the raw object: the Go program can neither throw a
// JavaScript exception (a panic would kill it) nor settle promises once it
// has died. This module turns the runtime's conventions into ordinary
// JavaScript behaviour: synchronous errors are thrown, and when the runtime
// exits or crashes every pending and later call rejects with a
// RuntimeExitedError instead of hanging. Types are in tabfence.d.ts.

/** The global the runtime stores its raw API object under. */
const GLOBAL = "__tabfence_v1";
/** The global holding the runtime's registry of held Web Locks (see start). */
const LOCKS = GLOBAL + "_locks";

// Memoized on globalThis, not in this module: the loader may be imported
// twice under different URLs (a bundle and a CDN copy, `?v=2`), and there
// must still be one runtime per page — two would be two sets of tabs
// electing leaders.
const LOADING = Symbol.for("tabfence.load.v1");

// Markers set by the Go side (wasm/jsapi_js.go).
const ASYNC = Symbol.for("tabfence.async"); // the function returns a promise
const THROW = Symbol.for("tabfence.throw"); // this returned Error must be thrown

// The message path's JavaScript half (package channel, wasm/channel_js.go).
// Every call into Go and every string or object handed to it has a fixed
// cost (a reference with a Go finalizer), so per message the runtime enters
// Go once with one header string instead of reading each field of the event
// from Go. These functions only reshape data: every decision (types,
// bounds, cursor, fencing) stays in Go, and without them (Go's own tests,
// or a page that loads the .wasm without this module) Go reads the fields
// itself with the same results.
const FASTPATH = Symbol.for("tabfence.fastpath.v1");
const FAST = (() => {
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
  const idbTransaction = globalThis.IDBDatabase?.prototype.transaction;
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
  // opFields writes a plainly shaped outbox operation into buf for Go:
  // u32 count, u32 byte lengths, then the UTF-8 of operationType,
  // operationKey, entityType, entityId (strings or absent), the payload (a
  // string, a Uint8Array's bytes, or any other value's JSON) and the
  // string dependency ids. It returns the bytes used, or -1 for anything
  // else (not an object, another field type, a throwing getter, no
  // payload, no room), which Go then reads field by field and judges.
  const opFields = (op, buf) => {
    try {
      if (typeof op !== "object" || op === null) return -1;
      const strs = [op.operationType, op.operationKey, op.entityType, op.entityId];
      for (let i = 0; i < 4; i++) {
        const v = strs[i];
        if (v === undefined || v === null) strs[i] = "";
        else if (typeof v !== "string") return -1;
      }
      let p = op.payload;
      if (p === undefined) return -1;
      if (typeof p !== "string" && !(p instanceof Uint8Array)) {
        p = JSON.stringify(p);
        if (typeof p !== "string") return -1;
      }
      strs.push(p);
      const deps = op.dependencyIds;
      if (typeof deps === "object" && deps !== null) {
        const n = deps.length;
        if (typeof n !== "number" || !(n >= 0) || n > 256) return -1;
        for (let i = 0; i < n; i++) if (typeof deps[i] === "string") strs.push(deps[i]);
      }
      const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
      let off = 4 + 4 * strs.length;
      if (off > buf.length) return -1;
      dv.setUint32(0, strs.length, true);
      for (let i = 0; i < strs.length; i++) {
        const v = strs[i];
        let w;
        if (typeof v === "string") {
          const r = enc.encodeInto(v, buf.subarray(off));
          if (r.read !== v.length) return -1;
          w = r.written;
        } else {
          if (v.length > buf.length - off) return -1;
          buf.set(v, off);
          w = v.length;
        }
        dv.setUint32(4 + 4 * i, w, true);
        off += w;
      }
      return off;
    } catch {
      return -1;
    }
  };
  // The outbox's plain appends (Go's outbox.AppendRules) are written here,
  // from the template Go publishes per outbox (appends): an enqueue makes
  // no call into Go before its commit. Go decides everything the record
  // holds besides the operation's own fields, two random ids and the time,
  // and learns of every committed append afterwards (done); the rules of
  // the stored form are Go's (outbox.appendRecordJSON), and a browser test
  // (TestLoaderAppendsWhatEnqueueWrites) holds this builder to them.
  //
  // Go's bookkeeping of committed appends (events, status, the flush hint)
  // is done for a burst at once: done("key,id,keyHash,ms;...") once per
  // DONE_MS instead of once per enqueue. The enqueue's promise does not
  // wait for it. In a hidden page the batch runs in the next task instead
  // (doneSoon): browsers run a hidden page's timers about once a second,
  // and the flush hint of an enqueue in a background tab would wait for
  // that (TestOutboxEnqueueInThrottledTab).
  const DONE_MS = 8;
  let doneQ = [], doneF = null, doneT = 0, donePort = null;
  const doneSoon = () => {
    if (doneT !== 0) return;
    if (globalThis.document?.hidden === true && typeof MessageChannel === "function") {
      if (donePort === null) {
        const mc = new MessageChannel();
        mc.port1.onmessage = () => doneRun();
        donePort = mc.port2;
      }
      doneT = -1; // a message, not a timer: clearTimeout(-1) does nothing
      donePort.postMessage(null);
    } else {
      doneT = setTimeout(doneRun, DONE_MS);
    }
  };
  // A page hidden while a batch waits for its timer runs the batch then.
  globalThis.document?.addEventListener?.("visibilitychange", () => {
    if (document.hidden && doneT > 0) doneRun();
  });
  const doneRun = () => {
    clearTimeout(doneT);
    doneT = 0;
    const q = doneQ, f = doneF;
    doneQ = [];
    doneF = null;
    if (q.length === 0) return;
    const out = [];
    for (let i = 0; i < q.length; i += 4) {
      // The operation key reaches Go only as its hash (outbox.HashKey),
      // as events carry it; hashed here, off the enqueue's path.
      const key = q[i + 2];
      out.push(q[i] + "," + q[i + 1] + "," + (key === "" ? "" : sha256hex(enc.encode(key)).slice(0, 16)) + "," + q[i + 3]);
    }
    try {
      f(out.join(";"));
    } catch (err) {
      report(err);
    }
  };
  // sha256hex is the lowercase hex SHA-256 of the bytes u (Go's
  // outbox.HashPayload), synchronous: crypto.subtle.digest returns a
  // promise, and an append's record is built and put in one step.
  const K256 = new Uint32Array([
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  ]);
  const W = new Uint32Array(64);
  const sha256hex = (u) => {
    const n = u.length, total = (n + 72) & ~63; // the message, 0x80, its bit length: whole blocks
    const m = new Uint8Array(total);
    m.set(u);
    m[n] = 0x80;
    const dv = new DataView(m.buffer);
    dv.setUint32(total - 8, Math.floor(n / 0x20000000));
    dv.setUint32(total - 4, (n << 3) >>> 0);
    let h0 = 0x6a09e667, h1 = 0xbb67ae85, h2 = 0x3c6ef372, h3 = 0xa54ff53a;
    let h4 = 0x510e527f, h5 = 0x9b05688c, h6 = 0x1f83d9ab, h7 = 0x5be0cd19;
    for (let off = 0; off < total; off += 64) {
      for (let i = 0; i < 16; i++) W[i] = dv.getUint32(off + 4 * i);
      for (let i = 16; i < 64; i++) {
        const x = W[i - 15], y = W[i - 2];
        const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
        const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
        W[i] = W[i - 16] + s0 + W[i - 7] + s1;
      }
      let a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7;
      for (let i = 0; i < 64; i++) {
        const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
        const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K256[i] + W[i]) | 0;
        const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
        const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
        h = g;
        g = f;
        f = e;
        e = (d + t1) | 0;
        d = c;
        c = b;
        b = a;
        a = (t1 + t2) | 0;
      }
      h0 = (h0 + a) | 0;
      h1 = (h1 + b) | 0;
      h2 = (h2 + c) | 0;
      h3 = (h3 + d) | 0;
      h4 = (h4 + e) | 0;
      h5 = (h5 + f) | 0;
      h6 = (h6 + g) | 0;
      h7 = (h7 + h) | 0;
    }
    return hex8(h0) + hex8(h1) + hex8(h2) + hex8(h3) + hex8(h4) + hex8(h5) + hex8(h6) + hex8(h7);
  };
  // newID is a random 128-bit id, 32 hex digits (Go's outbox.randomID),
  // from crypto.getRandomValues, drawn 16 ids at a time; used words are
  // cleared.
  const idWords = new Uint32Array(64);
  let idAt = idWords.length;
  const newID = () => {
    if (idAt === idWords.length) {
      crypto.getRandomValues(idWords);
      idAt = 0;
    }
    const i = idAt;
    idAt += 4;
    const id = hex8(idWords[i]) + hex8(idWords[i + 1]) + hex8(idWords[i + 2]) + hex8(idWords[i + 3]);
    idWords.fill(0, i, i + 4);
    return id;
  };
  // templates: outbox handle -> its template of plain appends (see
  // appends); only while the runtime lives and the page has what the
  // builder needs (Web Crypto, String.prototype.isWellFormed).
  const templates = new Map();
  const canAppend = typeof globalThis.crypto?.getRandomValues === "function" &&
    typeof String.prototype.isWellFormed === "function" && typeof idbTransaction === "function";
  // field is an optional string field of an operation, "" when absent, or
  // null for anything else (another type, or a lone surrogate, which Go
  // would store as U+FFFD: Go's path decides those).
  const field = (v) => (v === undefined || v === null ? "" : typeof v === "string" && v.isWellFormed() ? v : null);
  // append writes op as a plain append under template t of outbox handle
  // id (the key of its batch entries, see doneRun) and returns its
  // promise, or null when op is not one (Go's enqueue then takes it, and
  // decides or fails it): not a plainly shaped object, a type not in
  // t.types, a key its policy coalesces by, a payload above t.inlineLimit,
  // or a transaction that cannot be opened (the connection closed).
  //
  // The record is the object Go's appendRecordJSON makes for a fresh
  // record, in its field order, zero values left out; the payload (its
  // UTF-8 bytes, or a copy of the given bytes) last. The promise resolves
  // with {id, action} on the complete event; on abort it rejects with the
  // error Go makes of the transaction's (done(undefined, error)), after
  // the bookkeeping of the appends committed before.
  const append = (id, t, op) => {
    let rec, payload, tx;
    try {
      if (typeof op !== "object" || op === null) return null;
      const type = op.operationType;
      if (typeof type !== "string" || type === "" || !type.isWellFormed()) return null;
      const rule = t.types.get(type);
      if (rule === undefined) return null;
      const key = field(op.operationKey), etype = field(op.entityType), eid = field(op.entityId);
      if (key === null || etype === null || eid === null || (key !== "" && !rule[1])) return null;
      let p = op.payload;
      if (p instanceof Uint8Array) payload = p.slice();
      else {
        if (p === undefined) return null;
        if (typeof p !== "string") {
          p = JSON.stringify(p);
          if (typeof p !== "string") return null;
        }
        payload = enc.encode(p);
      }
      if (t.inlineLimit > 0 && payload.length > t.inlineLimit) return null;
      let deps = op.dependencyIds;
      if (deps === undefined || deps === null) deps = [];
      else {
        if (!Array.isArray(deps) || deps.length > 256) return null;
        deps = deps.slice();
        for (const d of deps) if (typeof d !== "string" || !d.isWellFormed()) return null;
      }
      const now = Date.now(), user = t.user;
      rec = { v: 1, id: newID() };
      if (key !== "") rec.operationKey = key;
      rec.idempotencyKey = newID();
      if (etype !== "") rec.entityType = etype;
      if (eid !== "") rec.entityId = eid;
      rec.operationType = type;
      rec.payloadHash = sha256hex(payload);
      if (t.schemaVersion !== 0) rec.payloadSchemaVersion = t.schemaVersion;
      rec.status = "pending";
      if (rule[0] !== 0) rec.maxAttempts = rule[0];
      rec.nextAttemptAt = now;
      if (deps.length > 0) rec.dependencyIds = deps;
      rec.createdAt = now;
      rec.updatedAt = now;
      rec.userId = user;
      if (t.tenant !== "") rec.tenantId = t.tenant;
      if (t.authGeneration !== 0) rec.authGeneration = t.authGeneration;
      rec._live = 1;
      rec._entity = eid === "" ? "\x01" + rec.id : user + "\0" + t.tenant + "\0" + etype + "\0" + eid;
      if (key !== "") rec._opKey = [user, key];
      if (payload.length > 0) rec.payload = payload; // none is left out, as Go does
      // The prototype's transaction, not the connection's own property:
      // the runtime tracks its transactions there (to abort them when the
      // page freezes), and an enqueue is not one to abort.
      tx = idbTransaction.call(t.db, t.names, "readwrite", t.opts);
    } catch {
      return null; // a throwing getter or toJSON, a closed connection: Go's path says what
    }
    try {
      tx.objectStore(t.names[0]).put(rec);
    } catch {
      try {
        tx.abort();
      } catch {}
      return null;
    }
    const value = { id: rec.id, action: "appended" }, opKey = rec.operationKey ?? "", at = rec.createdAt;
    const p = new Promise((resolve, reject) => {
      tx.addEventListener("complete", () => {
        resolve(value);
        doneQ.push(id, value.id, opKey, at);
        doneF = t.done;
        doneSoon();
      });
      tx.addEventListener("abort", () => {
        doneRun();
        try {
          reject(t.done(undefined, tx.error));
        } catch (err) {
          reject(err); // the runtime died meanwhile
        }
      });
    });
    try {
      tx.commit?.(); // now, not when the task ends; where missing, auto-commit
    } catch {} // already finishing (aborted): the events tell the outcome
    return p;
  };
  return Object.freeze({
    // attach hands over the runtime's exports once it is instantiated, and
    // null once it stopped: the exports of a stopped runtime are not called.
    attach(exports, onTrap) {
      if (exports === null) {
        // The runtime stopped: no append without its bookkeeping, and no
        // call into it.
        templates.clear();
        doneQ = [];
        doneF = null;
      }
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
    opFields,
    // enqueuer returns the enqueue method of outbox handle id: a plain
    // append under its template is written here (append), anything else
    // goes to slow (Go).
    enqueuer(id, slow) {
      return (op) => {
        const t = templates.get(id);
        if (t !== undefined) {
          const p = append(id, t, op);
          if (p !== null) return p;
        }
        return slow(op);
      };
    },
    // appends sets the template of outbox handle id's plain appends (Go's
    // outbox.Runtime.AppendTemplate), or deletes it (null): Go calls it
    // synchronously on every change (login, logout, close).
    appends(id, t) {
      if (canAppend && t !== null && typeof t === "object") templates.set(id, t);
      else templates.delete(id);
    },
  });
})();

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
 * ignored. If loading fails, the next call tries again.
 */
export function load(options) {
  const pending = globalThis[LOADING];
  if (pending) return pending;
  const p = start(options);
  globalThis[LOADING] = p;
  p.catch(() => {
    if (globalThis[LOADING] === p) delete globalThis[LOADING];
  });
  return p;
}

async function start(options) {
  const { wasmURL, wasmExecURL } = options ?? {};
  if (!wasmURL || (typeof wasmURL !== "string" && !(wasmURL instanceof URL))) {
    throw new TypeError("tabfence.load: wasmURL (a string or URL) is required");
  }
  if (typeof globalThis.Go !== "function") {
    // wasm_exec.js is a classic script that defines globalThis.Go; a
    // dynamic import runs it in windows and workers alike.
    await import(String(wasmExecURL ?? new URL("./wasm_exec.js", import.meta.url)));
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
  runtime.onDie = () => fast.attach?.(null);
  const ready = new Promise((resolve) => {
    globalThis[GLOBAL + "_ready"] = resolve;
  });
  try {
    const instance = await instantiate(wasmURL, go.importObject);
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
async function instantiate(url, imports) {
  const res = await fetch(url);
  if (!res.ok) {
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
