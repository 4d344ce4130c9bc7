// fast.js — the fencing store's hooks in the loader (package idb; the group
// "idb" of jsglue/loader's core.js). Apply's transaction must decide inside
// the fence read's success event, with nothing awaited: this opens it,
// issues the two reads and, in that event, gathers the records' fields as
// read into the exports' scratch and calls tabfence_idb_fence, where Go
// judges them (idb.JudgeFenceExported: the records' validation and Decide).
// For an accepted apply Go answers with the advanced fence, which tfFin
// writes after the caller's writes, then commits.

// layout is the version of these hooks' layout, the one Go speaks
// (idb.loaderLayout): a runtime that speaks another ignores the group and takes
// its own path, so a file cached from another build is never misread.
export const layout = 1;

export function hooks(core) {
  const { enc, dec } = core;
  const EPOCH = ["epoch", "ownerId", "updatedAt"], FENCE = ["highest", "highestSeq", "recent"];

  // record writes record v (key k) as read at off (idb.parseFields reads
  // it), text the index of the field wanted as text; it returns the offset
  // after it, or -1 when it does not fit.
  const record = (buf, dv, off, v, k, names, text) => {
    if (off + 2 > buf.length) return -1;
    if (v === undefined) return dv.setUint8(off, 0), off + 1;
    if (typeof v !== "object" || v === null) return dv.setUint8(off, 1), off + 1;
    const start = off;
    try {
      const r = v.resource;
      dv.setUint8(off, 2);
      dv.setUint8(off + 1, typeof r !== "string" ? 0 : r === k ? 1 : 2);
      off += 2;
      for (let i = 0; i < 3; i++) {
        const x = v[names[i]];
        if (off + 9 > buf.length) return -1;
        if (typeof x === "number") {
          dv.setUint8(off, 0);
          dv.setFloat64(off + 1, x, true);
          off += 9;
        } else if (typeof x === "string") {
          dv.setUint8(off, 1);
          dv.setUint32(off + 1, x.length, true);
          let w = 0;
          if (i === text) {
            if (3 * x.length > buf.length - off - 9) return -1;
            w = enc.encodeInto(x, buf.subarray(off + 9)).written;
          }
          dv.setUint32(off + 5, w, true);
          off += 9 + w;
        } else {
          dv.setUint8(off, 2);
          off += 1;
        }
      }
      return off;
    } catch {
      dv.setUint8(start, 3);
      return start + 1;
    }
  };

  // judge hands the two records to Go (pending apply id) and, when Go
  // accepted, prepares the advanced fence in g.tfFin.
  const judge = (id, x, f, g, p, k, kick) => {
    const ex = core.exports(); // null once the runtime stopped: Go reads the records itself
    if (ex === null) return;
    const buf = core.xscratch(), dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    let n = record(buf, dv, 0, p.result, k, EPOCH, -1);
    if (n >= 0) n = record(buf, dv, n, g.result, k, FENCE, 2);
    if (n < 0) return; // Go reads the records itself
    const v = core.enter(() => ex.tabfence_idb_fence(id, n));
    if (v & 1) core.later(kick);
    if ((v & 2) === 0) return;
    // Go may have grown its memory meanwhile, detaching the old view.
    const b = core.xscratch(), bv = new DataView(b.buffer, b.byteOffset, b.byteLength);
    let w = g.result;
    if (w === undefined) w = { resource: k };
    w.highest = bv.getFloat64(0, true);
    w.highestSeq = bv.getFloat64(8, true);
    w.recent = dec.decode(b.subarray(20, 20 + bv.getUint32(16, true)));
    g.tfFin = () => {
      f.put(w, k);
      try {
        x.commit?.();
      } catch {}
    };
  };

  // allocator(db, kick) returns allocate(key, owner, id) for connection
  // db: AllocateToken's transaction. Go judges the record read and answers
  // the token and time to write (idb.AllocExported); anything else aborts
  // it, writing nothing. It returns the transaction, or undefined when it
  // opened nothing.
  const allocator = (db, kick) => (k, o, id) => {
    if (core.exports() === null) return undefined;
    let x;
    try {
      x = db.transaction("tf_epochs", "readwrite");
      const s = x.objectStore("tf_epochs"), g = s.get(k);
      g.onsuccess = () => {
        try {
          const ex = core.exports();
          if (ex === null || typeof ex.tabfence_idb_alloc !== "function") throw 0;
          const buf = core.xscratch(), dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
          const n = record(buf, dv, 0, g.result, k, EPOCH, -1);
          if (n < 0) throw 0;
          const v = core.enter(() => ex.tabfence_idb_alloc(id, n));
          if (v & 1) core.later(kick);
          if ((v & 2) === 0) throw 0;
          const b = core.xscratch(), bv = new DataView(b.buffer, b.byteOffset, b.byteLength);
          let w = g.result;
          if (w === undefined) w = { resource: k };
          w.epoch = bv.getFloat64(0, true);
          w.ownerId = o;
          w.updatedAt = bv.getFloat64(8, true);
          s.put(w, k);
          x.commit?.();
        } catch (err) {
          if (err !== 0) core.report(err); // 0: Go's answer was no, not a fault
          try {
            x.abort();
          } catch {}
        }
      };
    } catch {
      try {
        x?.abort();
      } catch {}
      return undefined;
    }
    return x;
  };

  return {
    layout,
    allocator,
    // applier(db, hs, he, hc, ha, kick) returns apply(scope, key, id) for
    // connection db and Go's handlers (what every apply passes the same,
    // crossing once). apply opens apply id's transaction with those
    // handlers (hs runs after the judgement) and returns it, the fence
    // read in tfGet and the allocation record's in tfEg; undefined when it
    // opened nothing.
    applier: (db, hs, he, hc, ha, kick) => (s, k, id) => {
      const ex = core.exports();
      if (ex === null || typeof ex.tabfence_idb_fence !== "function") return undefined;
      let x, f, g, p;
      try {
        x = db.transaction(s, "readwrite");
        p = x.objectStore("tf_epochs").get(k);
        f = x.objectStore("tf_fences");
        g = f.get(k);
      } catch {
        try {
          x?.abort();
        } catch {}
        return undefined;
      }
      g.onsuccess = (e) => {
        try {
          judge(id, x, f, g, p, k, kick);
        } catch (err) {
          core.report(err);
        }
        hs(e);
      };
      g.onerror = he;
      x.oncomplete = hc;
      x.onabort = ha;
      x.tfGet = g;
      x.tfEg = p;
      return x;
    },
  };
}
