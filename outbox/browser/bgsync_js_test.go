//go:build js && wasm

package browser

import (
	"context"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue"
)

// installWorker registers a Service Worker for the test page (the runner's
// wasm_exec.js: any script will do, a sync event without a listener just
// ends) and waits until it is active, as a page's app would have done.
func installWorker(t *testing.T) js.Value {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sw := js.Global().Get("navigator").Get("serviceWorker")
	reg, err := jsglue.Await(ctx, sw.Call("register", "/wasm_exec.js"))
	require.NoError(t, err)
	t.Cleanup(func() { reg.Call("unregister") })
	_, err = jsglue.Await(ctx, sw.Get("ready"))
	require.NoError(t, err)
	return reg
}

// Without a worker, registering finds nothing to register with and fails
// nothing; with one, the page registers the queue's sync tag at open and
// after its enqueues (off with NoBackgroundSync), and enqueues still work.
func TestPageRegistersSyncTag(t *testing.T) {
	installMock(t)
	bare := openRT(t, uniq("nosw"), nil)
	enqueueN(t, bare, 1)
	waitFor(t, "bare acked", 5*time.Second, func() bool { return acked(t, bare) == 1 })
	require.Zero(t, bare.bs.Registered.Load()+bare.bs.Failed.Load())

	installWorker(t)
	// At open only a queue with unsettled records registers: an empty one
	// wakes no worker.
	r := openRT(t, uniq("sw"), nil)
	waitFor(t, "the check at open", 5*time.Second, func() bool { return r.bs.Checked.Load() })
	r.bs.mu.Lock()
	armed := r.bs.armed
	r.bs.mu.Unlock()
	require.False(t, armed, "a page opened on an empty queue registered the sync tag")
	require.Zero(t, r.bs.Registered.Load()+r.bs.Failed.Load())
	queuedName := uniq("swqueued")
	w := openRT(t, queuedName, func(c *RuntimeConfig) { c.Passive = true })
	enqueueN(t, w, 2) // a passive runtime sends nothing: they stay queued
	queued := openRT(t, queuedName, nil)
	waitFor(t, "registered at open", 5*time.Second, func() bool { return queued.bs.Registered.Load() >= 1 })
	off := openRT(t, uniq("swoff"), func(c *RuntimeConfig) { c.NoBackgroundSync = true })
	n := r.bs.Registered.Load()
	enqueueN(t, r, 3)
	enqueueN(t, off, 3)
	waitFor(t, "registered after the enqueues", 5*time.Second, func() bool { return r.bs.Registered.Load() > n })
	waitFor(t, "both acked", 5*time.Second, func() bool { return acked(t, r) == 3 && acked(t, off) == 3 })
	require.Zero(t, r.bs.Failed.Load())
	require.Zero(t, off.bs.Registered.Load()+off.bs.Failed.Load())
}
