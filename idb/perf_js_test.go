//go:build js && wasm

package idb

import (
	"context"
	"os"
	"strconv"
	"syscall/js"
	"testing"
	"time"
)

// TestAllocateRateVersusRawJS logs token allocations and fenced applies per
// second beside the same transactions in raw JavaScript (figures only; the
// bench target is 0.8x raw).
func TestAllocateRateVersusRawJS(t *testing.T) {
	if os.Getenv("TABFENCE_PERF") == "" {
		t.Skip("set TABFENCE_PERF=1")
	}
	name := dbName(t)
	d := open(t, name, WithSchema(itemsSchema()))
	ctx := context.Background()
	const n = 300
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := d.AllocateToken(ctx, "perf", "o"); err != nil {
			t.Fatal(err)
		}
	}
	goAlloc := float64(n) / time.Since(start).Seconds()
	start = time.Now()
	for i := 0; i < n; i++ {
		if _, err := d.Apply(ctx, Op{Resource: "perf", Token: 1, OperationID: "op" + strconv.Itoa(i)}, func(tx *WriteTx) error {
			return tx.Put("items", js.ValueOf("k"+strconv.Itoa(i)), js.ValueOf(i))
		}); err != nil {
			t.Fatal(err)
		}
	}
	goApply := float64(n) / time.Since(start).Seconds()
	raw := runJS(t, name, `
const db = await new Promise((res, rej) => { const r = indexedDB.open(name); r.onsuccess = () => res(r.result); r.onerror = () => rej(r.error); });
const N = `+strconv.Itoa(n)+`;
let t0 = performance.now();
for (let i = 0; i < N; i++) {
  await new Promise((res, rej) => {
    const tx = db.transaction("tf_epochs", "readwrite"); const st = tx.objectStore("tf_epochs");
    const g = st.get("rawperf"); g.onsuccess = () => { const cur = g.result ? g.result.epoch : 0; st.put({resource: "rawperf", epoch: cur + 1, ownerId: "o", updatedAt: Date.now()}, "rawperf"); };
    tx.oncomplete = res; tx.onerror = () => rej(tx.error);
  });
}
const alloc = N / ((performance.now() - t0) / 1000);
t0 = performance.now();
for (let i = 0; i < N; i++) {
  await new Promise((res, rej) => {
    const tx = db.transaction(["tf_fences", "items"], "readwrite"); const st = tx.objectStore("tf_fences");
    const g = st.get("rawperf"); g.onsuccess = () => { const f = g.result || {recent: []}; tx.objectStore("items").put(i, "r" + i); f.recent.push({id: "op" + i, token: 1, seq: 0}); if (f.recent.length > 64) f.recent.shift(); st.put({resource: "rawperf", highest: 1, highestSeq: 0, recent: f.recent}, "rawperf"); };
    tx.oncomplete = res; tx.onerror = () => rej(tx.error);
  });
}
const apply = N / ((performance.now() - t0) / 1000);
db.close();
return {alloc, apply};`)
	t.Logf("allocate: Go %.0f/s, raw JS %.0f/s (%.2fx)", goAlloc, raw.Get("alloc").Float(), goAlloc/raw.Get("alloc").Float())
	t.Logf("apply:    Go %.0f/s, raw JS %.0f/s (%.2fx)", goApply, raw.Get("apply").Float(), goApply/raw.Get("apply").Float())
}
