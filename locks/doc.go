// Package locks is tabfence's wrapper over the Web Locks API
// (navigator.locks) and the leader election built on it.
//
// Request and Query are thin, leak-free bindings of navigator.locks.request
// and navigator.locks.query. Election turns one exclusive lock into
// leadership among the tabs of a browser: every tab asks for the same lock,
// the browser grants it to one, and the queue of waiting requests is the
// failover — when the leader's tab goes away the browser hands the lock to
// the next waiter. No heartbeats, no timestamps — except for what the lock
// cannot see: a leader that is frozen or hung keeps its lock, and the
// opt-in watchdog (Config.StallAfter, see Watchdog) has followers steal
// from a leader whose heartbeats stopped.
//
// Why the protocol version is in the lock name: a leader keeps its lock as
// long as its tab is open, whether or not it can still do its job. A tab
// left open on an old build would otherwise keep leading after a deploy,
// and every tab on the new build would follow it forever. With the version
// in the name ("tabfence:<scope>:v<protocol>") each version elects its own
// leader, so an old tab can never hold a new one hostage.
//
// Why Steal is safe only with fencing: stealing takes the lock from a holder
// that is alive (perhaps frozen or slow), not dead. The browser tells the
// old holder at once (its request rejects with AbortError, and this package
// cancels its Leadership.Ctx), but a frozen tab learns it only when it
// thaws, and a write it already started still lands. Only a fencing token
// — a number that increases with every leadership and that receivers check
// (see Fencer) — makes the old holder's late writes harmless: they carry
// a lower token and are rejected as stale, and the rejected leader calls
// Leadership.StepDown.
//
// Everything that calls JavaScript lives in *_js.go files; names, option
// validation, reasons, errors and the election's state machine are plain Go,
// tested natively. Outside js/wasm, Request, Query and Election.Start
// return ErrUnavailable, so code using this package still builds and its
// examples compile everywhere.
//
// Nothing here blocks the JavaScript event loop: lock callbacks return a
// promise at once and Go settles it later; user callbacks run on their own
// goroutines with panics recovered. Start, Close, Resign and StepDown never
// block, so they may be called from a JavaScript callback; Request, Query, HasLeader and
// Steal wait and must be called from a goroutine.
package locks
