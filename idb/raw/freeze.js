// freeze.js: the body of the freeze tracker (freeze_js.go), made with
// Function("gf", "gr", body) when the page allows it: it tracks open
// transactions and aborts them on the page's freeze event (gf/gr tell Go).
const open = new Map();
let frozen = false;
const spared = (t, w) => w !== null && t.mode === "readwrite" && !w.some((n) => t.objectStoreNames.contains(n));
const abort = (t, f) => { try { if (f) t.tfFrozen = 1; t.abort(); } catch {} };
const abortAll = (db, f) => { for (const [t, w] of open) if ((db === null || t.db === db) && !spared(t, w)) abort(t, f); };
if (typeof document === "object" && document && typeof document.addEventListener === "function") {
  document.addEventListener("freeze", () => { frozen = true; gf(); abortAll(null, true); queueMicrotask(() => abortAll(null, true)); });
  document.addEventListener("resume", () => { frozen = false; gr(); });
}
return {
  track(db, w) {
    const orig = db.transaction;
    db.transaction = function (...args) {
      const t = orig.apply(this, args);
      open.set(t, w);
      const done = () => open.delete(t);
      t.addEventListener("complete", done);
      t.addEventListener("abort", done);
      if (frozen && !spared(t, w)) abort(t, true);
      return t;
    };
  },
  abortOpen: (db) => abortAll(db, false),
};
