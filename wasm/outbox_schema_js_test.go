//go:build js && wasm && !tabfence_core

package main

import (
	"strconv"
	"strings"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// obSchemaMock is a receiver that keeps every body it stored, in order.
const obSchemaMock = `(() => {
  const rx = globalThis.__obsx = {issued: 0, bodies: [], hex: []};
  globalThis.fetch = async (url, init) => {
    const u = new URL(url, location.href);
    if (u.pathname.startsWith("/fence/")) return new Response(JSON.stringify({resource: u.pathname.slice(7), token: ++rx.issued}), {status: 200});
    const bytes = new Uint8Array(await new Response(init.body).arrayBuffer());
    rx.bodies.push(new TextDecoder().decode(bytes));
    rx.hex.push([...bytes].map((b) => b.toString(16).padStart(2, "0")).join(""));
    return new Response("{}", {status: 201});
  };
})()`

func sentBodies() string {
	b := js.Global().Get("__obsx").Get("bodies")
	out := make([]string, b.Length())
	for i := range out {
		out[i] = b.Index(i).String()
	}
	return strings.Join(out, " ")
}

// Builds of different payload schemas on one queue: each sends its own
// schema, the newer one migrates older records with the app's migration
// (the stored record is not rewritten), the older one leaves newer records
// alone and shows them as unsupported, and a migration that throws leaves
// its record unsent and visible until a build with a working one sends it.
func TestOutboxSchemaVersions(t *testing.T) {
	eval(obSchemaMock)
	name := "schema-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	open := func(version int, migration string) js.Value {
		extra := map[string]any{"name": name, "schemaVersion": version}
		if migration != "" {
			extra["migrations"] = eval(`({1: ` + migration + `})`)
		}
		return openOb(t, extra)
	}
	const addV2 = `(p) => ({...p, v: 2})`
	enq := func(ob js.Value, id string) {
		mustAwait(t, ob.Call("enqueue", eval(`({operationType: "put-note", entityId: "`+id+`", payload: {id: "`+id+`"}})`)))
	}
	v1, v2 := open(1, ""), open(2, addV2)
	require.Equal(t, 1, v1.Get("schemaVersion").Int(), "handle versions")
	require.Equal(t, 2, v2.Get("schemaVersion").Int(), "handle versions")
	require.Equal(t, 1, v2.Get("protocol").Int(), "handle versions")
	mustAwait(t, v1.Call("pause"))
	enq(v1, "old1")
	enq(v2, "new1")
	n := mustAwait(t, v1.Call("status")).Get("unsupported").Int()
	require.EqualValues(t, 1, n, "v1 sees %d unsupported, want 1 (the v2 record)", n)
	n = mustAwait(t, v2.Call("status")).Get("unsupported").Int()
	require.EqualValues(t, 0, n, "v2 sees %d unsupported, want 0 (it migrates v1)", n)
	list := mustAwait(t, v1.Call("unsupported"))
	require.False(t, list.Length() != 1 || list.Index(0).Get("entityId").String() != "new1" || list.Index(0).Get("schemaVersion").Int() != 2, "v1's unsupported list %v", js.Global().Get("JSON").Call("stringify", list))

	// Only the v1 build flushes: it sends its own record, never the newer one.
	mustAwait(t, v2.Call("close"))
	mustAwait(t, v1.Call("resume"))
	waitStatus(t, v1, "old1 acked", func(s js.Value) bool { return s.Get("acked").Int() == 1 && s.Get("unsupported").Int() == 1 })
	got := sentBodies()
	require.EqualValues(t, `{"id":"old1"}`, got, "v1 sent %s", got)

	// A v2 build whose migration throws: new1 is sent, old2 stays as stored.
	mustAwait(t, v1.Call("pause"))
	enq(v1, "old2")
	mustAwait(t, v1.Call("close"))
	broken := open(2, `() => { throw new Error("no v2 for you") }`)
	mustAwait(t, broken.Call("resume"))
	waitStatus(t, broken, "new1 sent, old2 unsupported", func(s js.Value) bool {
		return s.Get("acked").Int() == 2 && s.Get("unsupported").Int() == 1
	})
	list = mustAwait(t, broken.Call("unsupported"))
	require.Equal(t, 1, list.Length(), "broken build's unsupported list %v", js.Global().Get("JSON").Call("stringify", list))
	u := list.Index(0)
	require.Equal(t, "old2", u.Get("entityId").String())
	require.Equal(t, 1, u.Get("schemaVersion").Int())
	require.Equal(t, "schema_unsupported", u.Get("lastError").Get("code").String())
	require.Equal(t, 0, u.Get("attempts").Int())
	got = sentBodies()
	require.EqualValues(t, `{"id":"old1"} {"id":"new1"}`, got, "sent %s", got)

	// A build with a working migration sends old2, migrated.
	mustAwait(t, broken.Call("close"))
	fixed := open(2, addV2)
	waitStatus(t, fixed, "old2 sent", func(s js.Value) bool {
		return s.Get("acked").Int() == 3 && s.Get("unsupported").Int() == 0 && s.Get("pending").Int() == 0
	})
	got = sentBodies()
	require.EqualValues(t, `{"id":"old1"} {"id":"new1"} {"id":"old2","v":2}`, got, "sent %s", got)
	_, err := await(t, obAPI.Call("outbox", eval(`({name: "x", endpoint: "/x", policies: {a: {dedupe: "append"}}, schemaVersion: 2, migrations: {2: (p) => p}})`)))
	wantName(t, err, "TypeError")
	_, err = await(t, obAPI.Call("outbox", eval(`({name: "x", endpoint: "/x", policies: {a: {dedupe: "append"}}, protocol: "4"})`)))
	wantName(t, err, "TypeError")
}

// A migration is synchronous and gets bytes as bytes: an async one (its
// promise would be sent as "{}") leaves its records unsent and
// unsupported; a payload that is not UTF-8 reaches the migration as a
// Uint8Array and is sent intact.
func TestOutboxMigrationAsyncAndBytes(t *testing.T) {
	eval(obSchemaMock)
	name := "schema-async-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	open := func(version int, migration string) js.Value {
		extra := map[string]any{"name": name, "schemaVersion": version}
		if migration != "" {
			extra["migrations"] = eval(`({1: ` + migration + `})`)
		}
		return openOb(t, extra)
	}
	v1 := open(1, "")
	mustAwait(t, v1.Call("pause"))
	mustAwait(t, v1.Call("enqueue", eval(`({operationType: "put-note", entityId: "j1", payload: {id: "j1"}})`)))
	mustAwait(t, v1.Call("enqueue", eval(`({operationType: "put-note", entityId: "b1", payload: new Uint8Array([0xff, 0x00, 0xfe])})`)))
	mustAwait(t, v1.Call("close"))

	async := open(2, `async (p) => p`)
	mustAwait(t, async.Call("resume"))
	waitStatus(t, async, "both records unsupported", func(s js.Value) bool { return s.Get("unsupported").Int() == 2 })
	require.Empty(t, sentBodies(), "an async migration's records were sent")
	mustAwait(t, async.Call("close"))

	fixed := open(2, `(p) => p instanceof Uint8Array ? p : ({...p, v: 2})`)
	waitStatus(t, fixed, "both sent", func(s js.Value) bool { return s.Get("acked").Int() == 2 && s.Get("unsupported").Int() == 0 })
	hex := js.Global().Get("__obsx").Get("hex")
	hexes := []string{hex.Index(0).String(), hex.Index(1).String()}
	require.Contains(t, hexes, "ff00fe", "the bytes sent intact")
	require.Contains(t, sentBodies(), `{"id":"j1","v":2}`, "j1 migrated")
}
