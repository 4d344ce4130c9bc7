// Package outbox is tabfence's durable, fenced outbox: offline mutations are
// recorded in a Store, and one flush owner at a time sends them to the
// receiver with an idempotency key and a fencing token, so that duplicates,
// crashes and stale owners never produce a second effect or a lost mutation.
//
// This package is the flush and the Outbox API, native and tested natively;
// the record core and the stores and the browser's parts live beside it:
// outbox/queue (the record, its state machine, the dedupe policies, the
// claim schedule, schemas and migrations: pure, imports nothing of the
// outbox), outbox/memstore (the in-memory Store, for tests and the
// simulation), outbox/idbstore (the IndexedDB Store), outbox/fetch (the
// Transport over fetch) and outbox/browser (the runtime in a page). Most
// tests here are external (package outbox_test) because they run on
// outbox/memstore; export_test.go lends them the internals they check.
//
//   - classify.go: the receiver's answers (Classify) and the retry timing
//     (Backoff, from outbox/queue); errors.go: the Outbox's and the
//     stores' errors.
//   - store.go, transport.go, events.go: the plug-in interfaces (the Store,
//     the Transport and its Request, events and the clock).
//   - outbox.go: the Outbox API; session.go, health.go: the queue's session
//     and the flush's failure spells; append.go: plain appends written
//     outside Go (the loader's wire format for them is in outbox/browser);
//     compact.go: acked records removed after their retention.
//   - The flush, one file per step: flush.go (the claim loop), lane.go (one
//     entity's records in order), charge.go (attempts charged before a
//     send), send.go (the request and the receiver's verdict), settle.go
//     (the transition written, counted and emitted), commit.go (the group
//     commit of concurrent lanes).
//   - The batch flush (Config.BatchEndpoint), on the same steps: batch.go
//     (pages cut from the claim's lanes, at most Concurrency in flight),
//     batchpage.go (a page charged, sent as one request, its outcomes
//     written in one transaction), batchanswer.go (the answer read as each
//     record's own answer, or as the whole request's: fallback to single
//     sends, smaller pages).
//
// The package is compiled into tabfence.wasm, so it avoids fmt, encoding/json,
// reflect, net/http and log: every byte is downloaded by every user.
package outbox
