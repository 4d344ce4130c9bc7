//go:build js && wasm && !tabfence_core

package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/internal/loaderstats"
)

// An enqueue the loader wrote is reported to Go (its enqueue event, its
// announcement) even when the outbox closes before the loader's batched
// report was due (DONE_MS after the commit): closing reports the queued
// commits before it releases the report's callback. Close follows the
// enqueue here at once, well inside that delay.
func TestOutboxCloseReportsLoaderAppends(t *testing.T) {
	withLoaderFastPath(t, true)
	eval(obMock)
	ob := openOb(t, nil)
	before, dropped := loaderAppends(), loaderstats.Dropped.Load()
	res := mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "a", payload: "{}"})`)))
	require.Equal(t, "appended", res.Get("action").String())
	mustAwait(t, ob.Call("close"))
	n := loaderAppends() - before
	require.EqualValues(t, 1, n, "appends reported to Go by the time close returned: %d, want 1", n)
	require.Equal(t, dropped, loaderstats.Dropped.Load(), "the loader's report named an append Go did not hold")
}
