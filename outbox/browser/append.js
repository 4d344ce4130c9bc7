// append.js — the outbox's hooks in the loader (package outbox's browser
// runtime; the group "outbox" of jsglue/loader's core.js): an enqueue
// through the JavaScript API writes its record in the caller's own task.
// Go decides and builds everything (Runtime.AppendFromScratch: whether the
// operation is a plain append, the record, its ids, hash and time); what
// is left here must run synchronously inside the browser event: the
// IndexedDB transaction, its put and commit, and the promise settled on
// its events.

// layout is the version of these hooks' layout, the one Go speaks
// (browser.loaderLayout): a runtime that speaks another ignores the group and takes
// its own path, so a file cached from another build is never misread.
export const layout = 1;

export function hooks(core) {
  const { enc, dec, report } = core;
  const idbTransaction = globalThis.IDBDatabase?.prototype.transaction;

  // opFields writes a plainly shaped outbox operation into buf for Go
  // (browser.DecodeOpFields reads it): u32 count, u32 the dependencyIds'
  // length as given (0xffffffff: none), u32 byte lengths, then the UTF-8 of
  // operationType, operationKey, entityType, entityId (strings or absent),
  // the payload (a string, a Uint8Array's bytes, or any other value's
  // JSON) and the string dependency ids. It returns the bytes
  // used, or -1 for anything else (not an object, another field type, a
  // throwing getter, no payload, no room in buf), which Go then reads field
  // by field and judges.
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
      let given = 0xffffffff;
      if (typeof deps === "object" && deps !== null) {
        const n = (given = deps.length);
        // Each id takes at least its 4-byte length: a longer list cannot
        // fit (and a forged length must not keep the tab in this loop).
        if (typeof n !== "number" || !(n >= 0) || 4 * (strs.length + 2 + n) > buf.length) return -1;
        for (let i = 0; i < n; i++) if (typeof deps[i] === "string") strs.push(deps[i]);
      }
      const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
      let off = 8 + 4 * strs.length;
      if (off > buf.length) return -1;
      dv.setUint32(0, strs.length, true);
      dv.setUint32(4, given, true);
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
        dv.setUint32(8 + 4 * i, w, true);
        off += w;
      }
      return off;
    } catch {
      return -1;
    }
  };

  // Go's bookkeeping of committed appends (events, status, the flush hint)
  // is done for a burst at once: each target's done("id;id;...") once per
  // DONE_MS instead of once per enqueue; the enqueue's promise does not
  // wait for it. In a hidden page the batch runs in the next task instead:
  // browsers run a hidden page's timers about once a second, and the flush
  // hint of an enqueue in a background tab would wait for that
  // (TestOutboxEnqueueInThrottledTab).
  const DONE_MS = 8;
  let doneQ = new Map(), doneT = 0, donePort = null;
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
    const q = doneQ;
    doneQ = new Map();
    for (const [t, ids] of q) {
      try {
        t.done(ids.join(";"));
      } catch (err) {
        report(err);
      }
    }
  };

  // doneKey reports now the queued commits of outbox handle key, whose
  // target is going away (the outbox closes, and releases done right
  // after): left for the timer, they would never reach Go, which then
  // neither emits their enqueue events nor announces them, though each
  // committed and resolved while the outbox was open.
  const doneKey = (key) => {
    for (const [t, ids] of doneQ) {
      if (t.key !== key) continue;
      doneQ.delete(t);
      try {
        t.done(ids.join(";"));
      } catch (err) {
        report(err);
      }
    }
  };

  // targets: outbox handle -> where its plain appends go ({key, db, names,
  // opts, done, kick, action}, Go's Runtime.publishTarget).
  const targets = new Map();
  core.onStop(() => {
    targets.clear();
    doneQ = new Map();
  });

  // append hands op to Go (tabfence_outbox_append) and, when Go built its
  // record, writes it under target t and returns its promise; null when Go
  // did not take it (not plainly shaped, not a plain append, no room) or
  // the transaction could not be opened: the caller then calls Go's
  // enqueue, which decides or fails it.
  const append = (key, t, op) => {
    const ex = core.exports();
    if (ex === null || typeof ex.tabfence_outbox_append !== "function" || typeof idbTransaction !== "function") return null;
    const buf = core.xscratch();
    const n = opFields(op, buf);
    if (n < 0) return null;
    const v = core.enter(() => ex.tabfence_outbox_append(key, n));
    if (v & 1) core.later(t.kick);
    const m = v >>> 2;
    if (m === 0) return null;
    // Go wrote the record after the operation; the payload (field 4) is
    // still where opFields put it. Read through a view made after the
    // call: Go allocates inside it, and a memory that grew detached buf.
    const out = core.xscratch();
    const rec = JSON.parse(dec.decode(out.subarray(n, n + m)));
    if (v & 2) {
      const dv = new DataView(out.buffer, out.byteOffset, out.byteLength);
      const count = dv.getUint32(0, true);
      let off = 8 + 4 * count;
      for (let i = 0; i < 4; i++) off += dv.getUint32(8 + 4 * i, true);
      rec.payload = out.slice(off, off + dv.getUint32(24, true));
    }
    let tx;
    try {
      // The prototype's transaction, not the connection's own property:
      // the runtime tracks its transactions there (to abort them when the
      // page freezes), and an enqueue is not one to abort.
      tx = idbTransaction.call(t.db, t.names, "readwrite", t.opts);
      tx.objectStore(t.names[0]).put(rec);
    } catch {
      try {
        tx?.abort();
      } catch {}
      t.done(undefined, null, rec.id); // Go forgets it; its enqueue says what went wrong
      return null;
    }
    const value = { id: rec.id, action: t.action };
    const p = new Promise((resolve, reject) => {
      tx.addEventListener("complete", () => {
        resolve(value);
        let ids = doneQ.get(t);
        if (ids === undefined) doneQ.set(t, (ids = []));
        ids.push(rec.id);
        doneSoon();
      });
      tx.addEventListener("abort", () => {
        doneRun();
        try {
          // done is released once the outbox closed: it then returns
          // nothing, and the promise still rejects with an AbortError.
          reject(t.done(undefined, tx.error, rec.id) ?? new DOMException("tabfence: the outbox closed before the enqueue committed", "AbortError"));
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

  return {
    layout,
    opFields,
    // enqueuer returns the enqueue method of outbox handle key: a plain
    // append is written here (append), anything else goes to slow (Go).
    enqueuer(key, slow) {
      return (op) => {
        const t = targets.get(key);
        if (t !== undefined) {
          const p = append(key, t, op);
          if (p !== null) return p;
        }
        return slow(op);
      };
    },
    // appends sets where outbox handle key's plain appends go, or deletes
    // it (db null) after reporting its queued commits: Go calls it
    // synchronously on every change (close, before it releases done).
    appends(key, db, names, opts, done, kick, action) {
      if (typeof db === "object" && db !== null) {
        targets.set(key, { key, db, names, opts, done, kick, action });
        return;
      }
      targets.delete(key);
      doneKey(key);
    },
  };
}
