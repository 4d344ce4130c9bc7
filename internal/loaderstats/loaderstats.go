// Package loaderstats counts what the loader reported of the plain appends
// it committed (outbox/browser's hook): the batches, the records they
// named, and the entries dropped (not a pending append: another script's
// call, a bug). The runtime only adds to the counters; they are here, not
// in outbox/browser's API, for the tests outside that package (the JS API's
// in wasm) that check the loader's batching.
package loaderstats

import "sync/atomic"

// The counters, since the program started.
var Batches, Records, Dropped atomic.Int64
