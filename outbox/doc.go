// Package outbox is tabfence's durable, fenced outbox: offline mutations are
// recorded in a Store (IndexedDB in the browser, MemStore in tests), and one
// flush owner at a time sends them to the receiver with an idempotency key and
// a fencing token, so that duplicates, crashes and stale owners never produce
// a second effect or a lost mutation.
//
// The package is split so that a browser Store and Transport can be written
// against it later without touching the domain:
//
//   - record.go, status.go: the record and its statuses.
//   - machine.go: pure state transitions (record + inputs + now -> record or
//     typed error). Every transition made under a lease checks owner + token.
//   - policy.go: per-operation-type dedupe at enqueue (PlanEnqueue).
//   - schedule.go: which records are due and claimable (PlanClaim).
//   - backoff.go, classify.go: retry timing and HTTP answer handling.
//   - store.go, transport.go, events.go: the plug-in interfaces.
//   - memstore.go: a thread-safe in-memory Store.
//   - outbox.go, flush.go: the Outbox API and the flusher.
//
// The package is compiled into tabfence.wasm, so it avoids fmt, encoding/json,
// reflect, net/http and log: every byte is downloaded by every user.
package outbox
