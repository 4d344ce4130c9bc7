//go:build js && wasm && !tabfence_core

package main

import (
	"context"
	"strconv"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
)

// tf.backgroundSync in one page, against the in-page receiver of
// outbox_js_test.go: the object's names, drain's reports (the lock held
// elsewhere, then free), its argument errors, close. The worker's side in
// a real Service Worker is in e2e.
func TestBackgroundSyncAPI(t *testing.T) {
	eval(obMock)
	rx := js.Global().Get("__obrx")
	opts := func() js.Value {
		return eval(`({endpoint: "/api/notes", policies: {"put-note": {dedupe: "append"}},
			stallAfterMs: 60000, backoff: {base: 10, cap: 20},
			// a Promise of the headers, as a worker reading a token from IndexedDB
			headers: (u) => new Promise((ok) => setTimeout(() => ok({"X-Demo-User": u}), 5))})`)
	}
	name := "sync-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	// A worker never logs a user in for every tab: a user option is refused
	// before anything opens.
	o := opts()
	o.Set("name", name)
	o.Set("user", "mallory")
	_, err := await(t, obAPI.Call("backgroundSync", o))
	wantName(t, err, "TypeError")
	o = opts()
	o.Set("name", name)
	so := mustAwait(t, obAPI.Call("backgroundSync", o))
	t.Cleanup(func() { await(t, so.Call("close")) })
	require.Equal(t, name, so.Get("name").String())
	require.Equal(t, "tabfence:outbox-"+name+":v1", so.Get("lockName").String())
	require.Equal(t, so.Get("lockName").String(), so.Get("syncTag").String())
	require.Equal(t, 1, so.Get("protocol").Int())
	require.Equal(t, 1, so.Get("schemaVersion").Int())

	// Another holder of the flush lock (a tab flushing) while a page
	// enqueues and goes away: the page skips, the drain waits and gives up.
	js.Global().Set("__lockName", so.Get("lockName"))
	mustAwait(t, eval(`new Promise((held) => navigator.locks.request(__lockName, () => { held(); return new Promise((r) => globalThis.__releaseLock = r); }))`))
	o = opts()
	o.Set("name", name)
	o.Set("user", "alice")
	page := mustAwait(t, obAPI.Call("outbox", o))
	for _, id := range []string{"a", "b"} {
		mustAwait(t, page.Call("enqueue", eval(`({operationType: "put-note", entityId: "`+id+`", payload: "{}"})`)))
	}
	mustAwait(t, page.Call("close"))
	// A budget well past the reads before the lock request, on a loaded machine.
	rep := mustAwait(t, so.Call("drain", eval(`({timeoutMs: 1500})`)))
	require.Equal(t, `{"claimed":0,"acked":0,"retried":0,"deadLettered":0,"terminal":0,"conflicts":0,"requests":0,"remaining":2,"retry":true,"reason":"busy"}`, stringify(rep))

	js.Global().Get("__releaseLock").Invoke()
	rep = mustAwait(t, so.Call("drain"))
	require.Equal(t, `{"claimed":2,"acked":2,"retried":0,"deadLettered":0,"terminal":0,"conflicts":0,"requests":2,"remaining":0,"retry":false,"reason":"done"}`, stringify(rep))
	require.Equal(t, 2, rx.Get("effects").Int())
	rep = mustAwait(t, so.Call("drain", eval(`({lastChance: true})`)))
	require.Equal(t, "done", rep.Get("reason").String())

	for _, bad := range []string{`5`, `({timeoutMs: "1"})`, `({timeoutMs: 0})`, `({lastChance: 1})`} {
		_, err := await(t, so.Call("drain", eval(bad)))
		wantName(t, err, "TypeError")
	}
	_, err = await(t, obAPI.Call("backgroundSync", eval(`({name: "x"})`)))
	wantName(t, err, "TypeError")
	o = opts()
	o.Set("name", name)
	o.Set("backgroundSync", "yes")
	_, err = await(t, obAPI.Call("outbox", o))
	wantName(t, err, "TypeError")

	mustAwait(t, so.Call("close"))
	_, err = await(t, so.Call("drain"))
	wantName(t, err, "InvalidStateError")
	mustAwait(t, so.Call("close"))
}

// A headers hook that rejects with a message holding a token: the error
// the outbox keeps has the error's name, never the message.
func TestHeadersHookErrorKeepsNoToken(t *testing.T) {
	hook := eval(`(u) => Promise.reject(new RangeError("Bearer s3cret-token for " + u))`)
	err := authorize(hook)(context.Background(), outbox.Request{UserID: "alice"}, outbox.Header{})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
	require.Equal(t, "RangeError", jsglue.NameOf(err))
	err = authorize(eval(`() => { throw new Error("token=s3cret") }`))(context.Background(), outbox.Request{}, outbox.Header{})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret")
}

func stringify(v js.Value) string { return js.Global().Get("JSON").Call("stringify", v).String() }
