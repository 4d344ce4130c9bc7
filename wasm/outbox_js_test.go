//go:build js && wasm && !tabfence_core

package main

import (
	"context"
	_ "embed"
	"strconv"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/internal/loaderstats"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/jsglue/loader"
	"github.com/tabfence/tabfence/jsglue/loader/loadertest"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/browser"
)

// tf.outbox in one page, against an in-page receiver that replaces fetch
// (fencing tokens, idempotency keys); the multi-tab behaviour against the
// real server is in e2e/outbox_test.go.

var obAPI = api

const obMock = `(() => {
  const rx = globalThis.__obrx = {issued: 0, keys: {}, effects: 0, status: 0};
  globalThis.fetch = async (url, init) => {
    const u = new URL(url, location.href), h = new Headers(init && init.headers);
    if (u.pathname.startsWith("/fence/")) return new Response(JSON.stringify({resource: u.pathname.slice(7), token: ++rx.issued}), {status: 200});
    if (!h.get("X-Demo-User")) return new Response("{}", {status: 401});
    if (rx.status) return new Response("{}", {status: rx.status});
    const key = h.get("Idempotency-Key");
    if (!rx.keys[key]) { rx.keys[key] = true; rx.effects++; }
    return new Response("{}", {status: 201});
  };
})()`

func await(t *testing.T, p js.Value) (js.Value, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return jsglue.Await(ctx, p)
}

func mustAwait(t *testing.T, p js.Value) js.Value {
	t.Helper()
	v, err := await(t, p)
	require.NoError(t, err)
	return v
}

func wantName(t *testing.T, err error, name string) {
	t.Helper()
	require.Error(t, err, "want %s", name)
	require.Equal(t, name, jsglue.NameOf(err), "want %s, got %v", name, err)
}

func openOb(t *testing.T, extra map[string]any) js.Value {
	t.Helper()
	opts := eval(`({endpoint: "/api/notes", user: "alice", headers: (u) => ({"X-Demo-User": u}),
		policies: {"put-note": {dedupe: "append"}, "edit": {dedupe: "replace-latest"}, "merge": {dedupe: "merge"}},
		maxAttempts: 2, backoff: {base: 10, cap: 20}})`)
	opts.Set("name", "api-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	for k, v := range extra {
		opts.Set(k, v)
	}
	ob := mustAwait(t, obAPI.Call("outbox", opts))
	t.Cleanup(func() { await(t, ob.Call("close")) })
	return ob
}

func waitStatus(t *testing.T, ob js.Value, what string, cond func(js.Value) bool) js.Value {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := mustAwait(t, ob.Call("status"))
		if cond(st) {
			return st
		}
		require.False(t, time.Now().After(deadline), "timed out waiting for %s: %v", what, js.Global().Get("JSON").Call("stringify", st))
		time.Sleep(20 * time.Millisecond)
	}
}

func TestOutboxAPI(t *testing.T) {
	eval(obMock)
	rx := js.Global().Get("__obrx")
	ob := openOb(t, nil)
	var statuses, events int
	ob.Call("onStatus", jsglue.NewCallback(func(js.Value, []js.Value) any { statuses++; return nil }).Value)
	ob.Call("onEvent", jsglue.NewCallback(func(_ js.Value, a []js.Value) any {
		assert.EqualValues(t, js.TypeUndefined, a[0].Get("payload").Type(), "an event carries a payload")
		events++
		return nil
	}).Value)
	res := mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityType: "note", entityId: "a", payload: {id: "a", text: "x"}})`)))
	require.False(t, res.Get("id").String() == "" || res.Get("action").String() != "appended", "enqueue result %v", res)
	mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "b", payload: new TextEncoder().encode('{"id":"b","text":""}')})`)))
	st := waitStatus(t, ob, "2 acked", func(s js.Value) bool { return s.Get("acked").Int() == 2 })
	require.False(t, rx.Get("effects").Int() != 2 || st.Get("leaseToken").Float() < 1, "effects %d, status %v", rx.Get("effects").Int(), js.Global().Get("JSON").Call("stringify", st))
	// Status pushes are debounced: the poll above can see the records acked
	// before the push that reports it has fired. Wait for it (the callbacks
	// run on the event loop, which time.Sleep yields to).
	for deadline := time.Now().Add(5 * time.Second); statuses == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	require.False(t, statuses == 0 || events == 0, "no pushes: %d statuses, %d events", statuses, events)

	// named errors
	_, err := await(t, obAPI.Call("outbox", eval(`({name: "", endpoint: "/x", policies: {}})`)))
	wantName(t, err, "TypeError")
	_, err = await(t, obAPI.Call("outbox", eval(`({name: "x", endpoint: "/x", policies: {a: {dedupe: "guess"}}})`)))
	wantName(t, err, "TypeError")
	for _, batch := range []string{`"/x/batch"`, `{}`, `{endpoint: ""}`, `{endpoint: "/x/batch", max: 0}`, `{endpoint: "/x/batch", max: 1.5}`, `{endpoint: "/x/batch", maxBytes: -1}`} {
		_, err = await(t, obAPI.Call("outbox", eval(`({name: "x", endpoint: "/x", policies: {a: {dedupe: "append"}}, batch: `+batch+`})`)))
		wantName(t, err, "TypeError")
		require.Contains(t, err.Error(), "batch", "batch: %s", batch)
	}
	_, err = await(t, ob.Call("enqueue", eval(`({operationType: "nope", payload: "x"})`)))
	wantName(t, err, "UnknownOperationError")
	_, err = await(t, ob.Call("enqueue", eval(`({operationType: "put-note"})`)))
	wantName(t, err, "TypeError")
	_, err = await(t, ob.Call("retry", "no-such-record"))
	wantName(t, err, "NotFoundError")

	// dead letter, listed, retried, discarded
	rx.Set("status", 503)
	mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "c", payload: "{}"})`)))
	waitStatus(t, ob, "a dead letter", func(s js.Value) bool { return s.Get("deadLetter").Int() == 1 })
	dl := mustAwait(t, ob.Call("deadLetters"))
	require.Equal(t, 1, dl.Length(), "dead letters %v", js.Global().Get("JSON").Call("stringify", dl))
	require.Equal(t, "dead_letter", dl.Index(0).Get("status").String())
	require.Equal(t, 2, dl.Index(0).Get("attempts").Int())
	require.Equal(t, "http_503", dl.Index(0).Get("lastError").Get("code").String())
	id := dl.Index(0).Get("id").String()
	rx.Set("status", 0)
	mustAwait(t, ob.Call("retry", id))
	waitStatus(t, ob, "retried and acked", func(s js.Value) bool { return s.Get("acked").Int() == 3 && s.Get("deadLetter").Int() == 0 })
	_, err = await(t, ob.Call("discard", id))
	wantName(t, err, "InvalidStateError") // acked records are not the app's to discard

	// pause: nothing is sent; flush reports it
	mustAwait(t, ob.Call("pause"))
	mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "d", payload: "{}"})`)))
	rep := mustAwait(t, ob.Call("flush"))
	require.True(t, rep.Get("paused").Bool(), "flush while paused: %v", js.Global().Get("JSON").Call("stringify", rep))
	st = mustAwait(t, ob.Call("status"))
	require.False(t, !st.Get("paused").Bool() || st.Get("pending").Int() != 1, "paused status %v", js.Global().Get("JSON").Call("stringify", st))
	mustAwait(t, ob.Call("resume"))
	waitStatus(t, ob, "resumed", func(s js.Value) bool { return s.Get("acked").Int() == 4 })

	// logout with purge, then no session
	mustAwait(t, ob.Call("pause"))
	mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "e", payload: "{}"})`)))
	n := mustAwait(t, ob.Call("logout", eval(`({purge: true})`)))
	require.False(t, n.Int() < 1, "purged %v", n)
	_, err = await(t, ob.Call("enqueue", eval(`({operationType: "put-note", payload: "{}"})`)))
	wantName(t, err, "NoSessionError")
	mustAwait(t, ob.Call("login", "bob"))
	mustAwait(t, ob.Call("close"))
	_, err = await(t, ob.Call("status"))
	wantName(t, err, "InvalidStateError")
}

func TestOutboxMergePolicy(t *testing.T) {
	eval(obMock)
	ob := openOb(t, nil)
	mustAwait(t, ob.Call("pause"))
	a := mustAwait(t, ob.Call("enqueue", eval(`({operationType: "merge", operationKey: "k", entityId: "m", payload: {a: 1, b: 1}})`)))
	b := mustAwait(t, ob.Call("enqueue", eval(`({operationType: "merge", operationKey: "k", entityId: "m", payload: {b: 2}})`)))
	require.False(t, b.Get("action").String() != "merged" || b.Get("id").String() != a.Get("id").String(), "merge: %v", js.Global().Get("JSON").Call("stringify", b))
}

// withLoaderFastPath installs the loader's fast path, made from the
// shipped modules (core.js and every hook group, imported as modules) as
// tabfence.js makes it, for the outboxes opened until t ends, as a page
// that uses the loader has it. With exports, the instance's wasm exports
// are attached to it, as the loader attaches them: plain appends are then
// built by Go through tabfence_outbox_append and written by the hook, their
// promise settled on the transaction's events.
func withLoaderFastPath(t *testing.T, exports bool) js.Value {
	t.Helper()
	fast := loaderFastPath(t)
	if exports {
		ex, err := loadertest.Exports()
		require.NoError(t, err)
		require.Equal(t, js.TypeFunction, ex.Get("tabfence_outbox_append").Type())
		fast.Call("attach", ex)
		t.Cleanup(func() { fast.Call("attach", nil) })
	}
	t.Cleanup(loadertest.Install(fast))
	t.Cleanup(func() {
		assert.EqualValues(t, js.TypeFunction, loaderOpFields.Type(), "the outbox did not take the loader's fast path")
	})
	return fast
}

//go:embed api.js
var apiJS string

// loaderFastPath makes the loader's fast path from the shipped modules.
func loaderFastPath(t *testing.T) js.Value {
	t.Helper()
	fast, err := loadertest.NewFastPath(t.Context(), map[string]string{
		loader.GroupChannel: channel.LoaderJS, loader.GroupOutbox: browser.LoaderJS, loader.GroupAPI: apiJS,
	})
	require.NoError(t, err)
	return fast
}

// loaderBatches is how many batches of commits the loader reported.
func loaderBatches() int64 {
	return loaderstats.Batches.Load()
}

// loaderAppends is how many records the loader reported committed.
func loaderAppends() int64 {
	return loaderstats.Records.Load()
}

// The API tests again, as a page that uses the loader runs them.
func TestOutboxAPIThroughLoader(t *testing.T) {
	for _, exports := range []bool{false, true} {
		x := "exports=" + strconv.FormatBool(exports)
		t.Run("API/"+x, func(t *testing.T) {
			withLoaderFastPath(t, exports)
			before := loaderAppends()
			TestOutboxAPI(t)
			// Every enqueue of TestOutboxAPI that commits is a plain
			// append: 5 (the bookkeeping may trail by DONE_MS). Go builds
			// them through its export: without exports the loader leaves
			// every enqueue to Go.
			want := map[bool]int64{true: 5}[exports]
			for deadline := time.Now().Add(5 * time.Second); loaderAppends()-before < want && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			n := loaderAppends() - before
			require.EqualValues(t, want, n, "the loader wrote %d appends, want %d", n, want)
		})
		t.Run("Merge/"+x, func(t *testing.T) { withLoaderFastPath(t, exports); TestOutboxMergePolicy(t) })
	}
}

// An enqueue whose transaction IndexedDB aborts after the write was issued
// rejects, writes nothing and emits no enqueue event; the next one works.
// With the loader (the promise settled in JavaScript) and without it (a Go
// goroutine awaits the commit), alike.
func TestOutboxEnqueueAborted(t *testing.T) {
	for _, mode := range []string{"js.Func", "loader"} {
		viaLoader := mode != "js.Func"
		t.Run(mode, func(t *testing.T) {
			if viaLoader {
				withLoaderFastPath(t, true)
			}
			eval(obMock)
			ob := openOb(t, nil)
			before := loaderAppends()
			mustAwait(t, ob.Call("pause"))
			var enqueues int
			ob.Call("onEvent", jsglue.NewCallback(func(_ js.Value, a []js.Value) any {
				if a[0].Get("kind").String() == "outbox.enqueue" {
					enqueues++
				}
				return nil
			}).Value)
			// The page aborts the transaction right after the record's put.
			eval(`(() => {
  const put = IDBObjectStore.prototype.put;
  globalThis.__restorePut = () => { IDBObjectStore.prototype.put = put; };
  IDBObjectStore.prototype.put = function (...a) {
    const r = put.apply(this, a);
    if (this.name === "records") this.transaction.abort();
    return r;
  };
})()`)
			_, err := await(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "a", payload: "{}"})`)))
			eval(`__restorePut()`)
			require.Error(t, err, "an aborted enqueue resolved")
			wantName(t, err, "AbortError")
			st := mustAwait(t, ob.Call("status"))
			require.EqualValues(t, 0, st.Get("pending").Int(), "aborted enqueue left %d pending", st.Get("pending").Int())
			res := mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "b", payload: "{}"})`)))
			require.EqualValues(t, "appended", res.Get("action").String(), "enqueue after the abort: %v", js.Global().Get("JSON").Call("stringify", res))
			waitStatus(t, ob, "1 pending", func(s js.Value) bool { return s.Get("pending").Int() == 1 })
			for deadline := time.Now().Add(5 * time.Second); enqueues == 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			require.EqualValues(t, 1, enqueues, "%d enqueue events, want 1 (the committed one)", enqueues)
			n := loaderAppends() - before
			require.EqualValues(t, map[bool]int64{true: 1}[viaLoader], n, "the loader wrote %d appends (loader: %v)", n, viaLoader)
		})
	}
}

// Through the loader, Go's bookkeeping of committed enqueues (their events,
// the flush hint) is done in batches: a burst of enqueues costs fewer
// entries into Go than enqueues, and every enqueue still gets its event,
// once.
func TestOutboxEnqueueBookkeepingBatched(t *testing.T) {
	withLoaderFastPath(t, true)
	eval(obMock)
	ob := openOb(t, nil)
	mustAwait(t, ob.Call("pause"))
	seen := map[string]int{}
	ob.Call("onEvent", jsglue.NewCallback(func(_ js.Value, a []js.Value) any {
		if a[0].Get("kind").String() == "outbox.enqueue" {
			seen[a[0].Get("recordId").String()]++
		}
		return nil
	}).Value)
	before := loaderBatches()
	const n = 30
	res := mustAwait(t, eval(`((ob, n) => Promise.all(Array.from({length: n}, (_, i) => ob.enqueue({operationType: "put-note", entityId: "e" + i, payload: "{}"}))))`).Invoke(ob, n))
	for deadline := time.Now().Add(5 * time.Second); len(seen) < n && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	require.EqualValues(t, n, len(seen), "%d enqueue events for %d enqueues", len(seen), n)
	for i := 0; i < n; i++ {
		id := res.Index(i).Get("id").String()
		require.EqualValues(t, 1, seen[id], "enqueue %s: %d events", id, seen[id])
	}
	b := loaderBatches() - before
	require.False(t, b < 1 || b >= n, "%d batches for %d enqueues", b, n)
}

// The loader's opFields and Go's field-by-field reading agree on every
// operation: the same Op, or the same error (opFields leaves whatever
// is not plainly shaped to Go).
func TestOpArgFastAgreesWithSlow(t *testing.T) {
	fast := loaderFastPath(t)
	saved := loaderOpFields
	loaderOpFields = fast.Get("outbox").Get("opFields")
	t.Cleanup(func() { loaderOpFields = saved })
	ops := eval(`[
  {operationType: "put", payload: "x"},
  {operationType: "put", operationKey: "k", entityType: "note", entityId: "é\u0000𝄞", payload: {a: [1, "b"]}, dependencyIds: ["d1", 7, "d2", null]},
  {operationType: "put", payload: new TextEncoder().encode("bytes"), entityId: null, operationKey: undefined},
  {operationType: "put", payload: new Uint8Array(new ArrayBuffer(10), 2, 3)},
  {operationType: "put", payload: null},
  {operationType: "put", payload: 12.5, dependencyIds: []},
  {operationType: "lone \ud800 surrogate", payload: "\udc00"},
  {operationType: "", payload: "x"},
  {payload: "x"},
  {operationType: 5, payload: "x"},
  {operationType: "put", entityId: 5, payload: "x"},
  {operationType: "put"},
  {operationType: "put", payload: undefined},
  {operationType: "put", payload: () => 1},
  {operationType: "put", payload: {toJSON() { throw new Error("no"); }}},
  {operationType: "put", payload: 1n},
  {operationType: "put", payload: "x", dependencyIds: {}},
  {operationType: "put", payload: "x", dependencyIds: {length: 2, 0: "a", 1: "b"}},
  {operationType: "put", payload: "x", dependencyIds: "abc"},
  {operationType: "put", payload: "x", dependencyIds: Array.from({length: 300}, (_, i) => "d" + i)},
  {operationType: "put", payload: "y".repeat(20000)},
  {operationType: "put", payload: "x", dependencyIds: {length: 1e12}},
  {operationType: "put", payload: "x", dependencyIds: {length: NaN}},
  {operationType: "put", payload: "x", dependencyIds: Array.from({length: 1001}, (_, i) => "d" + i)},
  {operationType: "put", payload: "x", dependencyIds: [1n, "a", {}, "b"]},
  {operationType: "put", payload: "x", dependencyIds: new Proxy(["a"], {get(t, k) { if (k === "0") throw new Error("trap"); return t[k]; }})},
  {operationType: 1n, payload: "x"},
  {operationType: "put", entityId: 1n, payload: "x"},
  {get operationType() { throw new Error("getter"); }, payload: "x"},
  Object.assign(Object.create({operationType: "inherited"}), {payload: "x"}),
  new Proxy({operationType: "put", payload: "x"}, {}),
  null, 5, "op", [],
]`)
	for i := 0; i < ops.Length(); i++ {
		v := ops.Index(i)
		got, gerr := opArg(v)
		want, werr := opArgSlow(v)
		if werr != nil {
			assert.EqualError(t, gerr, werr.Error(), "op %d: the same error field by field", i)
			continue
		}
		if assert.NoError(t, gerr, "op %d: field by field it reads", i) {
			assert.Equal(t, want, got, "op %d: fast and field by field", i)
		}
	}
	// The fast path took the plain ones (not everything fell back).
	_, ok := opArgFast(ops.Index(1))
	require.True(t, ok, "opFields did not take a plain operation")
}

// lastOutbox is the runtime of the outbox opened last.
func lastOutbox(t *testing.T) *browser.Runtime {
	t.Helper()
	o, ok := outboxes.Last()
	require.True(t, ok, "no open outbox")
	return o.rt
}

// storedPair reads the stored objects of records a and b from outbox name's
// database and returns, for each, its JSON with the values that differ by
// nature (ids, times) replaced by their shape: the field order and every
// other value are what the comparison sees. The payload (bytes) is written
// as an array.
const storedPair = `(async (name, a, b) => {
  const req = (r) => new Promise((ok, fail) => { r.onsuccess = () => ok(r.result); r.onerror = () => fail(r.error); });
  const db = await req(indexedDB.open("tabfence-outbox:" + name));
  const ix = db.transaction("records").objectStore("records").index("id");
  const recs = [await req(ix.get(a)), await req(ix.get(b))];
  db.close();
  return recs.map((r) => {
    if (!r) return "missing";
    const hex = (s) => typeof s === "string" && /^[0-9a-f]{32}$/.test(s) ? "<hex32>" : "bad:" + s;
    const o = {};
    for (const [k, v] of Object.entries(r)) o[k] = v;
    if ("payload" in o) {
      if (!(o.payload instanceof Uint8Array) || o.payload.length === 0) return "payload is not bytes, or empty bytes";
      o.payload = Array.from(o.payload);
    }
    if (o._entity === "\x01" + o.id) o._entity = "<\\x01 id>";
    o.id = hex(o.id);
    o.idempotencyKey = hex(o.idempotencyKey);
    const t = o.createdAt;
    if (typeof t !== "number" || Math.abs(t - Date.now()) > 60000 || o.updatedAt !== t || o.nextAttemptAt !== t) return "times " + [t, o.updatedAt, o.nextAttemptAt];
    o.createdAt = o.updatedAt = o.nextAttemptAt = "<now>";
    o.seq = typeof o.seq === "number" ? "<seq>" : "bad seq";
    return JSON.stringify(o);
  });
})`

// A plain append through the loader's hooks (Go builds the record through
// its export, the hook writes it) stores the record Go's Enqueue writes for
// the same operation: the same stored fields in the same order with the
// same values, but for the random ids and the time; the same payload hash
// (payloads on both sides of SHA-256's block boundaries, odd strings and
// lists read as Go reads them); the same enqueue event. And it takes only
// plain appends: what Go declines (a key its policy coalesces by, a payload
// for the blob store) is written by Go's enqueue.
func TestLoaderAppendsWhatEnqueueWrites(t *testing.T) {
	withLoaderFastPath(t, true)
	eval(obMock)
	ob := openOb(t, nil)
	mustAwait(t, ob.Call("pause"))
	r := lastOutbox(t)
	name := ob.Get("name").String()
	hashes := map[string]string{}
	ob.Call("onEvent", jsglue.NewCallback(func(_ js.Value, a []js.Value) any {
		if e := a[0]; e.Get("kind").String() == "outbox.enqueue" {
			h := e.Get("operationKeyHash")
			if h.IsUndefined() {
				h = js.ValueOf("")
			}
			hashes[e.Get("recordId").String()] = h.String()
		}
		return nil
	}).Value)
	ops := eval(`[
  {operationType: "put-note", entityType: "note", entityId: "é\u0000𝄞\"\\", payload: {id: "a", text: "x"}},
  {operationType: "put-note", operationKey: "k1 é", entityId: "b", payload: "string é", dependencyIds: ["d1", "d2"]},
  {operationType: "put-note", payload: new Uint8Array([0, 1, 2, 255])},
  {operationType: "put-note", entityType: null, entityId: "c", operationKey: null, payload: "", dependencyIds: []},
  {operationType: "edit", entityId: "e", payload: {n: 1}},
  ...[55, 56, 63, 64, 119, 120, 1000].map((n) => ({operationType: "put-note", entityId: "n" + n, payload: "x".repeat(n)})),
  {operationType: "put-note", entityId: "lone \ud800", payload: "x"},
  {operationType: "put-note", entityId: "d", payload: "x", dependencyIds: [1, "a"]},
  {operationType: "put-note", entityId: "d", payload: "x", dependencyIds: Array.from({length: 1000}, (_, i) => "d" + i)},
]`)
	declined := eval(`[
  {operationType: "edit", operationKey: "k", entityId: "e2", payload: {n: 2}},
  {operationType: "put-note", entityId: "big", payload: "y".repeat(70000)},
]`)
	ctx := context.Background()
	check := func(v js.Value, plain bool) {
		t.Helper()
		before := loaderAppends()
		res := mustAwait(t, ob.Call("enqueue", v))
		op, err := opArgSlow(v)
		require.NoError(t, err)
		ref, err := r.Enqueue(ctx, op)
		require.NoError(t, err)
		id := res.Get("id").String()
		// Its enqueue event (the loader's bookkeeping trails by DONE_MS).
		for deadline := time.Now().Add(5 * time.Second); ; {
			if _, ok := hashes[id]; ok || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		n := loaderAppends() - before
		require.False(t, (n == 1) != plain || n > 1, "%s: the loader wrote %d records (a plain append: %v)", js.Global().Get("JSON").Call("stringify", v), n, plain)
		if !plain {
			return
		}
		require.EqualValues(t, "appended", res.Get("action").String(), "action %v", res.Get("action"))
		got, want := hashes[id], outbox.HashKey(op.OperationKey)
		require.EqualValues(t, want, got, "operationKeyHash %q, Go's %q", got, want)
		pair := mustAwait(t, eval(storedPair).Invoke(name, id, ref.ID))
		a, b := pair.Index(0).String(), pair.Index(1).String()
		require.EqualValues(t, b, a, "stored records differ:\nloader  %s\nEnqueue %s", a, b)
	}
	for i := 0; i < ops.Length(); i++ {
		check(ops.Index(i), true)
	}
	for i := 0; i < declined.Length(); i++ {
		check(declined.Index(i), false)
	}
}

// The loader's done callback (browser.Runtime's, with its append target): an
// aborted append's error keeps its cause's name (a full disk is a
// QuotaExceededError, not an AbortError), and batch entries that are not
// pending appends of its outbox (another script's call, a bug, a second
// report of a committed one) are counted and dropped, never delivered.
func TestAppendedCallback(t *testing.T) {
	fast := withLoaderFastPath(t, true)
	// The outbox group again, keeping the target the runtime publishes.
	spy := eval(`((fast) => {
  const spy = {done: null};
  const outbox = {...fast.outbox, appends(k, ...t) { if (t[0]) spy.done = t[3]; fast.outbox.appends(k, ...t); }};
  spy.fast = {...fast, outbox};
  return spy;
})`).Invoke(fast)
	t.Cleanup(loadertest.Install(spy.Get("fast")))
	eval(obMock)
	ob := openOb(t, nil)
	mustAwait(t, ob.Call("pause"))
	done := spy.Get("done")
	quota := js.Global().Get("DOMException").New("The quota has been exceeded.", "QuotaExceededError")
	if name := done.Invoke(js.Undefined(), quota).Get("name").String(); name != "QuotaExceededError" {
		t.Fatalf("aborted by a full disk: %s", name)
	}
	if name := done.Invoke(js.Undefined(), js.Null()).Get("name").String(); name != "AbortError" {
		t.Fatalf("aborted by the page: %s", name)
	}
	var events int
	ob.Call("onEvent", jsglue.NewCallback(func(_ js.Value, a []js.Value) any {
		if a[0].Get("kind").String() == "outbox.enqueue" {
			events++
		}
		return nil
	}).Value)
	res := mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "a", payload: "{}"})`)))
	waitStatus(t, ob, "1 pending", func(s js.Value) bool { return s.Get("pending").Int() == 1 })
	for deadline := time.Now().Add(5 * time.Second); events == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	records, dropped := loaderstats.Records.Load(), loaderstats.Dropped.Load()
	done.Invoke("garbage;;0123456789abcdef0123456789abcdef;" + res.Get("id").String())
	records2, dropped2 := loaderstats.Records.Load(), loaderstats.Dropped.Load()
	require.Equal(t, int64(4), dropped2-dropped, "dropped entries")
	require.Equal(t, int64(0), records2-records, "entries delivered")
	require.Equal(t, 1, events, "enqueue events")
}

// A page hidden while a batch of appends waits for its 8 ms timer (which a
// hidden page would run about a second later) runs the batch at once, on
// visibilitychange.
func TestAppendedBatchRunsWhenHidden(t *testing.T) {
	withLoaderFastPath(t, true)
	eval(obMock)
	ob := openOb(t, nil)
	mustAwait(t, ob.Call("pause"))
	var snaps []int64
	before := loaderBatches()
	snap := jsglue.NewCallback(func(js.Value, []js.Value) any {
		snaps = append(snaps, loaderBatches()-before)
		return nil
	})
	defer snap.Release()
	// All in the microtask after the commit: the batch's timer cannot have
	// fired in between.
	mustAwait(t, eval(`(async (ob, snap) => {
		await ob.enqueue({operationType: "put-note", entityId: "h", payload: "{}"});
		snap();
		Object.defineProperty(document, "hidden", {configurable: true, get: () => true});
		try {
			document.dispatchEvent(new Event("visibilitychange"));
		} finally {
			delete document.hidden;
		}
		snap();
	})`).Invoke(ob, snap.Value))
	require.Equal(t, []int64{0, 1}, snaps, "batches run before and after the page was hidden")
}

// A loader of an older layout (the flat v1 object, under its own key) is
// never called by this runtime: an outbox opened beside it (and the
// channel it announces on) takes Go's own paths, and works.
func TestOlderLoaderIgnored(t *testing.T) {
	calls := eval(`(() => {
  const calls = [];
  const v1 = {};
  for (const n of ["attach", "payload", "rx", "poster", "post", "post2", "deliver", "deliverHeld", "opFields", "enqueuer", "appends"]) {
    v1[n] = (...a) => { calls.push(n); throw new Error("v1 hook called: " + n); };
  }
  globalThis[Symbol.for("tabfence.fastpath.v1")] = v1;
  return calls;
})()`)
	t.Cleanup(func() { eval(`delete globalThis[Symbol.for("tabfence.fastpath.v1")]`) })
	eval(obMock)
	ob := openOb(t, nil)
	mustAwait(t, ob.Call("pause"))
	res := mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "a", payload: "{}"})`)))
	require.Equal(t, "appended", res.Get("action").String())
	waitStatus(t, ob, "1 pending", func(s js.Value) bool { return s.Get("pending").Int() == 1 })
	require.True(t, loaderOpFields.IsUndefined(), "the runtime took a v1 hook")
	require.Equal(t, 0, calls.Length(), "v1 hooks called")
}
