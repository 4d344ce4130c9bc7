// Package queue is the outbox's record core: the stored record and the pure
// rules over it, with no Store, transport or clock of its own. A Store runs
// them inside its transactions (nothing but Go between two requests), the
// flush in package outbox decides with them, and the simulation checks them.
//
//   - record.go: the Record, its statuses, ErrorInfo, the Lease;
//     machine.go: the state transitions (every one made under a lease
//     checks owner and token); lease.go: the lease row's rules.
//   - policy.go: the dedupe policies (one table, dedupeRules) and
//     PlanEnqueue.
//   - schedule.go: which records are due and claimable (PlanClaim) and the
//     claim's per-entity lanes; pages.go: a batch flush's pages cut from
//     those lanes (Pager); backoff.go: the retry timing (Backoff).
//   - schema.go, migrate.go: the queue's names per protocol, the payload
//     schemas a runtime sends, migrates or leaves alone, the migrations.
//   - errors.go: the transitions' and plans' errors; sort.go: the seq order
//     every Store lists records in.
//
// It imports nothing of the outbox (cmd/shape's layer table holds it to
// that) and is compiled into tabfence.wasm: no fmt, encoding/json, reflect.
package queue
