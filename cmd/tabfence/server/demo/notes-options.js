// The notes outbox's options, one module for the demo's pages (notes.js)
// and its Service Worker (sw.js): the page and the worker open the same
// queue with the same policies, versions, migrations and headers hook.
// Both take them from URL parameters: the page's own, and the worker's
// script URL, which the page builds from its own (workerSearch).
//
// Parameters: outbox (queue name), protocol, schema (payload schema: 2
// migrates schema-1 notes by adding v: 2), maxAttempts, backoffBase,
// backoffCap, statusTimeout, stallAfter (ms), concurrency, auth=cookie (the
// credentials are a cookie every tab and the worker send; otherwise the
// X-Demo-User header from the record's user), bgsync=0 (pages do not
// register Background Sync), batch=0 (one POST /api/notes per record
// instead of batches to POST /api/notes/batch) and batchMax (mutations per
// batch, default 100).

/** The parameters of notesOptions that the worker needs. */
export const workerParams = ["outbox", "protocol", "schema", "maxAttempts", "backoffBase", "backoffCap",
  "statusTimeout", "stallAfter", "concurrency", "auth", "batch", "batchMax"];

/** The worker's script URL query for a page of params: its workerParams only. */
export function workerSearch(params) {
  const q = new URLSearchParams();
  for (const k of workerParams) if (params.has(k)) q.set(k, params.get(k));
  return q.toString();
}

/** Schema 2 of a note: { id, text, v: 2 }. */
const migrations = { 1: (p) => ({ ...p, v: 2 }) };

/** The outbox options (without user: a page adds its login, the worker takes the queue's). */
export function notesOptions(params) {
  const num = (k, d) => (params.has(k) ? Number(params.get(k)) : d);
  const schemaVersion = num("schema", 1);
  return {
    name: params.get("outbox") || "notes",
    endpoint: "/api/notes",
    // Due records go up to batchMax at a time to the receiver's batch
    // route, each with its own key; batch=0 sends them one by one.
    ...(params.get("batch") === "0" ? {} : { batch: { endpoint: "/api/notes/batch", ...(params.has("batchMax") ? { max: num("batchMax", 100) } : {}) } }),
    // demo only: real apps add their auth here (or rely on their cookie)
    headers: params.get("auth") === "cookie" ? undefined : (user) => ({ "X-Demo-User": user }),
    policies: {
      "put-note": { dedupe: "append" },
      "edit-note": { dedupe: "replace-latest" },
    },
    maxAttempts: num("maxAttempts", 10),
    backoff: { base: num("backoffBase", 1000), cap: num("backoffCap", 30000) },
    statusTimeoutMs: num("statusTimeout", 1500),
    stallAfterMs: num("stallAfter", 1000),
    concurrency: num("concurrency", 4),
    protocol: num("protocol", 1),
    schemaVersion,
    ...(schemaVersion > 1 ? { migrations } : {}),
    backgroundSync: params.get("bgsync") !== "0",
  };
}
