//go:build js && wasm && !tabfence_core

package main

import (
	"context"
	"reflect"
	"strconv"
	"syscall/js"
	"testing"
	"time"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/jsglue/loader"
)

// tf.outbox in one page, against an in-page receiver that replaces fetch
// (fencing tokens, idempotency keys); the multi-tab behaviour against the
// real server is in e2e/outbox_test.go.

var obAPI = func() js.Value {
	o := newObject()
	registerOutbox(o)
	return o
}()

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
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func wantName(t *testing.T, err error, name string) {
	t.Helper()
	if err == nil || jsglue.NameOf(err) != name {
		t.Fatalf("want %s, got %v (%s)", name, err, jsglue.NameOf(err))
	}
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
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %v", what, js.Global().Get("JSON").Call("stringify", st))
		}
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
		if a[0].Get("payload").Type() != js.TypeUndefined {
			t.Error("an event carries a payload")
		}
		events++
		return nil
	}).Value)
	res := mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityType: "note", entityId: "a", payload: {id: "a", text: "x"}})`)))
	if res.Get("id").String() == "" || res.Get("action").String() != "appended" {
		t.Fatalf("enqueue result %v", res)
	}
	mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "b", payload: new TextEncoder().encode('{"id":"b","text":""}')})`)))
	st := waitStatus(t, ob, "2 acked", func(s js.Value) bool { return s.Get("acked").Int() == 2 })
	if rx.Get("effects").Int() != 2 || st.Get("leaseToken").Float() < 1 {
		t.Fatalf("effects %d, status %v", rx.Get("effects").Int(), js.Global().Get("JSON").Call("stringify", st))
	}
	// Status pushes are debounced: the poll above can see the records acked
	// before the push that reports it has fired. Wait for it (the callbacks
	// run on the event loop, which time.Sleep yields to).
	for deadline := time.Now().Add(5 * time.Second); statuses == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if statuses == 0 || events == 0 {
		t.Fatalf("no pushes: %d statuses, %d events", statuses, events)
	}

	// named errors
	_, err := await(t, obAPI.Call("outbox", eval(`({name: "", endpoint: "/x", policies: {}})`)))
	wantName(t, err, "TypeError")
	_, err = await(t, obAPI.Call("outbox", eval(`({name: "x", endpoint: "/x", policies: {a: {dedupe: "guess"}}})`)))
	wantName(t, err, "TypeError")
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
	if dl.Length() != 1 || dl.Index(0).Get("status").String() != "dead_letter" || dl.Index(0).Get("attempts").Int() != 2 ||
		dl.Index(0).Get("lastError").Get("code").String() != "http_503" {
		t.Fatalf("dead letters %v", js.Global().Get("JSON").Call("stringify", dl))
	}
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
	if !rep.Get("paused").Bool() {
		t.Fatalf("flush while paused: %v", js.Global().Get("JSON").Call("stringify", rep))
	}
	if st := mustAwait(t, ob.Call("status")); !st.Get("paused").Bool() || st.Get("pending").Int() != 1 {
		t.Fatalf("paused status %v", js.Global().Get("JSON").Call("stringify", st))
	}
	mustAwait(t, ob.Call("resume"))
	waitStatus(t, ob, "resumed", func(s js.Value) bool { return s.Get("acked").Int() == 4 })

	// logout with purge, then no session
	mustAwait(t, ob.Call("pause"))
	mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "e", payload: "{}"})`)))
	n := mustAwait(t, ob.Call("logout", eval(`({purge: true})`)))
	if n.Int() < 1 {
		t.Fatalf("purged %v", n)
	}
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
	if b.Get("action").String() != "merged" || b.Get("id").String() != a.Get("id").String() {
		t.Fatalf("merge: %v", js.Global().Get("JSON").Call("stringify", b))
	}
}

// withLoaderFastPath installs the loader's FAST object (from
// jsglue/loader/tabfence.js itself) for the outboxes opened until t ends, as
// a page that uses the loader has it: enqueue's promise is then settled by
// the loader's FAST.enqueue on the transaction's events. With exports, the
// instance's wasm exports are attached to it, as the loader attaches them:
// enqueue then enters Go through tabfence_enqueue.
func withLoaderFastPath(t *testing.T, exports bool) {
	t.Helper()
	key := js.Global().Get("Symbol").Call("for", "tabfence.fastpath.v1")
	fast := eval(loader.FastPath())
	if exports {
		g, err := loader.GoInstance()
		if err != nil {
			t.Fatal(err)
		}
		ex := g.Get("_inst").Get("exports")
		if ex.Get("tabfence_enqueue").Type() != js.TypeFunction {
			t.Fatal("no export tabfence_enqueue")
		}
		fast.Call("attach", ex)
		t.Cleanup(func() { fast.Call("attach", nil) })
	}
	js.Global().Get("Reflect").Call("set", js.Global(), key, fast)
	t.Cleanup(func() {
		js.Global().Get("Reflect").Call("deleteProperty", js.Global(), key)
		if loaderEnqueue.Type() != js.TypeFunction {
			t.Error("the outbox did not take the loader's enqueue()")
		}
	})
}

// The API tests again, as a page that uses the loader runs them.
func TestOutboxAPIThroughLoader(t *testing.T) {
	for _, exports := range []bool{false, true} {
		x := "exports=" + strconv.FormatBool(exports)
		t.Run("API/"+x, func(t *testing.T) {
			withLoaderFastPath(t, exports)
			before := exportedEnqueues.Load()
			TestOutboxAPI(t)
			if n := exportedEnqueues.Load() - before; (n > 0) != exports {
				t.Fatalf("%d enqueues entered Go through tabfence_enqueue", n)
			}
		})
		t.Run("Merge/"+x, func(t *testing.T) { withLoaderFastPath(t, exports); TestOutboxMergePolicy(t) })
	}
}

// An enqueue whose transaction IndexedDB aborts after the write was issued
// rejects, writes nothing and emits no enqueue event; the next one works.
// With the loader (the promise settled in JavaScript) and without it (a Go
// goroutine awaits the commit), alike.
func TestOutboxEnqueueAborted(t *testing.T) {
	for _, mode := range []string{"js.Func", "loader", "exports"} {
		viaLoader := mode != "js.Func"
		t.Run(mode, func(t *testing.T) {
			if viaLoader {
				withLoaderFastPath(t, mode == "exports")
			}
			eval(obMock)
			ob := openOb(t, nil)
			if got := loaderEnqueue.Type() == js.TypeFunction; got != viaLoader {
				t.Fatalf("FAST.enqueue in use: %v", got)
			}
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
			if err == nil {
				t.Fatal("an aborted enqueue resolved")
			}
			wantName(t, err, "AbortError")
			if st := mustAwait(t, ob.Call("status")); st.Get("pending").Int() != 0 {
				t.Fatalf("aborted enqueue left %d pending", st.Get("pending").Int())
			}
			res := mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "b", payload: "{}"})`)))
			if res.Get("action").String() != "appended" {
				t.Fatalf("enqueue after the abort: %v", js.Global().Get("JSON").Call("stringify", res))
			}
			waitStatus(t, ob, "1 pending", func(s js.Value) bool { return s.Get("pending").Int() == 1 })
			for deadline := time.Now().Add(5 * time.Second); enqueues == 0 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if enqueues != 1 {
				t.Fatalf("%d enqueue events, want 1 (the committed one)", enqueues)
			}
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
	before := enqueuedBatches.Load()
	const n = 30
	res := mustAwait(t, eval(`((ob, n) => Promise.all(Array.from({length: n}, (_, i) => ob.enqueue({operationType: "put-note", entityId: "e" + i, payload: "{}"}))))`).Invoke(ob, n))
	for deadline := time.Now().Add(5 * time.Second); len(seen) < n && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if len(seen) != n {
		t.Fatalf("%d enqueue events for %d enqueues", len(seen), n)
	}
	for i := 0; i < n; i++ {
		if id := res.Index(i).Get("id").String(); seen[id] != 1 {
			t.Fatalf("enqueue %s: %d events", id, seen[id])
		}
	}
	if b := enqueuedBatches.Load() - before; b < 1 || b >= n {
		t.Fatalf("%d batches for %d enqueues", b, n)
	}
}

// The loader's FAST.opFields and Go's field-by-field reading agree on every
// operation: the same Op, or the same error (FAST.opFields leaves whatever
// is not plainly shaped to Go).
func TestOpArgFastAgreesWithSlow(t *testing.T) {
	fast := eval(loader.FastPath())
	saved := loaderOpFields
	loaderOpFields = fast.Get("opFields")
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
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() {
			t.Errorf("op %d: error %v, field by field %v", i, gerr, werr)
			continue
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("op %d:\n fast %+v\n slow %+v", i, got, want)
		}
	}
	// The fast path took the plain ones (not everything fell back).
	if _, ok := opArgFast(ops.Index(1)); !ok {
		t.Fatal("FAST.opFields did not take a plain operation")
	}
}
