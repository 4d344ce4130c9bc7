// idb.js: the raw JavaScript transactions the idb layer is measured against,
// by the bench (cmd/bench/browserbench/idbbench) and idb's phases tests. A
// function body, made with Function("appStore", body) (benchjs.IDB): it
// returns { loop, phases }.
//
// Each kind is one readwrite transaction over scope: pre issues what comes
// before the read (its request is e), the read is g = st.get(k) on store,
// and body runs in the read's success event (i is the operation's number).
// body returns false when it aborted the transaction instead of writing.
const kinds = {
  allocate: {
    scope: "tf_epochs",
    store: "tf_epochs",
    pre: () => null,
    body(tx, st, g, e, k, i) {
      const cur = g.result ? g.result.epoch : 0;
      st.put({ resource: k, epoch: cur + 1, ownerId: "bench", updatedAt: Date.now() }, k);
      return true;
    },
  },
  apply: {
    scope: ["tf_epochs", "tf_fences", appStore],
    store: "tf_fences",
    pre: (tx, k) => tx.objectStore("tf_epochs").get(k),
    body(tx, st, g, e, k, i) {
      const id = "op" + i;
      if (1 < (e.result ? e.result.epoch : 0) || 1 < (g.result ? g.result.highest : 0)) {
        tx.abort();
        return false;
      }
      let ids = g.result && g.result.recent ? g.result.recent.split("\n") : [];
      if (ids.includes(id)) {
        tx.abort();
        return false;
      }
      tx.objectStore(appStore).put(i, "j" + i);
      ids.push(id);
      if (ids.length > 64) ids = ids.slice(ids.length - 64);
      st.put({ resource: k, highest: 1, highestSeq: 0, recent: ids.join("\n") }, k);
      return true;
    },
  },
};

// loop runs n transactions of kind on db one after the other, operations
// from..from+n-1 on key k, each committing when the event loop finds it
// idle, as a plain page's transaction does; it resolves to the elapsed ms.
const loop = async (db, kind, k, from, n) => {
  const { scope, store, pre, body } = kinds[kind];
  const t0 = performance.now();
  for (let i = from; i < from + n; i++) {
    await new Promise((res, rej) => {
      const tx = db.transaction(scope, "readwrite");
      const e = pre(tx, k);
      const st = tx.objectStore(store);
      const g = st.get(k);
      g.onsuccess = () => body(tx, st, g, e, k, i);
      tx.oncomplete = res;
      tx.onabort = () => rej(tx.error || new DOMException("aborted", "AbortError"));
    });
  }
  return performance.now() - t0;
};

// phases is loop with an explicit commit, timed by phase: it resolves to
// the mean ms of issuing (transaction to the read issued), the read,
// decide+write (the body and the commit call) and the commit.
const phases = async (db, kind, k, from, n) => {
  const { scope, store, pre, body } = kinds[kind];
  const s = [0, 0, 0, 0];
  for (let i = from; i < from + n; i++) {
    await new Promise((res, rej) => {
      const t0 = performance.now();
      let t2, t3;
      const tx = db.transaction(scope, "readwrite");
      const e = pre(tx, k);
      const st = tx.objectStore(store);
      const g = st.get(k);
      const t1 = performance.now();
      g.onsuccess = () => {
        t2 = performance.now();
        if (!body(tx, st, g, e, k, i)) return;
        tx.commit();
        t3 = performance.now();
      };
      tx.oncomplete = () => {
        s[0] += t1 - t0;
        s[1] += t2 - t1;
        s[2] += t3 - t2;
        s[3] += performance.now() - t3;
        res();
      };
      tx.onabort = () => rej(tx.error);
    });
  }
  return s.map((x) => x / n);
};

return { loop, phases };
