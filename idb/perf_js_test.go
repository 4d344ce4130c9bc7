//go:build js && wasm

package idb

import (
	"context"
	"os"
	"slices"
	"strconv"
	"syscall/js"
	"testing"
	"time"

	"github.com/tabfence/tabfence/jsglue"
)

// TestAllocateRateVersusRawJS logs token allocations and fenced applies per
// second beside the same transactions in raw JavaScript in the same page,
// interleaved (figures only; the bench target is 0.8x raw).
func TestAllocateRateVersusRawJS(t *testing.T) {
	if os.Getenv("TABFENCE_PERF") == "" {
		t.Skip("set TABFENCE_PERF=1")
	}
	ctx := context.Background()
	n := 600
	if s := os.Getenv("TABFENCE_PERF_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	var prevGo, prevJS time.Duration
	benchTrace = func(r int, goT, jsT time.Duration) {
		t.Logf("  round %d: Go %v/op, JS %v/op", r, (goT-prevGo)/time.Duration(n/benchRounds), (jsT-prevJS)/time.Duration(n/benchRounds))
		prevGo, prevJS = goT, jsT
	}
	defer func() { benchTrace = nil }()
	a, err := BenchAllocate(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("allocate: Go %.0f/s, raw JS %.0f/s (%.2fx; median %.2f)", a.GoPerSec, a.JSPerSec, a.GoPerSec/a.JSPerSec, med(a.Ratios))
	prevGo, prevJS = 0, 0
	p, err := BenchApply(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("apply:    Go %.0f/s, raw JS %.0f/s (%.2fx; median %.2f)", p.GoPerSec, p.JSPerSec, p.GoPerSec/p.JSPerSec, med(p.Ratios))
}

// TestAllocatePhases splits one token allocation's transaction into its
// phases, in Go (this package's layer) and in raw JavaScript, alternating:
// issuing (transaction, store, get), waiting for the read, the read's event
// reaching Go (from a listener registered before Go's to the goroutine
// running again), the decision and writes, and the commit until Go runs
// again. Figures only: where the Go side's extra time per transaction goes.
// It times the Go path (the one pages that refuse eval take, see allocJS),
// issuing its requests itself.
func TestAllocatePhases(t *testing.T) {
	if os.Getenv("TABFENCE_PERF") == "" {
		t.Skip("set TABFENCE_PERF=1")
	}
	ctx := context.Background()
	d, err := Open(ctx, "tabfence-phases-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	perf := js.Global().Get("performance")
	now := func() float64 { return perf.Call("now").Float() }
	stamp := js.Global().Get("Function").New("globalThis.__tabfenceStamp = performance.now()")
	rawJS := js.Global().Get("Function").New("db", "n", `return (async () => {
  const s = [0, 0, 0, 0];
  for (let i = 0; i < n; i++) {
    await new Promise((res, rej) => {
      const t0 = performance.now(); let t1, t2, t3;
      const tx = db.transaction("tf_epochs", "readwrite");
      const st = tx.objectStore("tf_epochs");
      const g = st.get("phases-js");
      t1 = performance.now();
      g.onsuccess = () => {
        t2 = performance.now();
        const cur = g.result ? g.result.epoch : 0;
        st.put({resource: "phases-js", epoch: cur + 1, ownerId: "bench", updatedAt: Date.now()}, "phases-js");
        tx.commit();
        t3 = performance.now();
      };
      tx.oncomplete = () => { s[0] += t1 - t0; s[1] += t2 - t1; s[2] += t3 - t2; s[3] += performance.now() - t3; res(); };
      tx.onabort = () => rej(tx.error);
    });
  }
  return s.map((x) => x / n);
})()`)
	const n = 200
	key := jsString("phases-go")
	for round := 0; round < 4; round++ {
		var s [5]float64
		for i := 0; i < n; i++ {
			t0 := now()
			tx, err := d.begin(ReadWrite, d.scopeEpochs)
			if err != nil {
				t.Fatal(err)
			}
			st := tx.Store(StoreEpochs)
			rq := st.Get(key)
			rq.v.Call("addEventListener", "success", stamp)
			t1 := now()
			v, err := rq.Await(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t2 := now()
			ev := js.Global().Get("__tabfenceStamp").Float()
			epoch, err := epochOf(v, "phases-go", key)
			if err != nil {
				t.Fatal(err)
			}
			rec := EpochRecord{Resource: "phases-go", Epoch: epoch + 1, OwnerID: "bench", UpdatedAt: time.Now().UnixMilli()}
			if err := st.Put(key, d.encodeEpoch(rec, key, v)).Err(); err != nil {
				t.Fatal(err)
			}
			_ = tx.Commit()
			t3 := now()
			if err := tx.Await(ctx); err != nil {
				t.Fatal(err)
			}
			t4 := now()
			s[0] += t1 - t0
			s[1] += ev - t1
			s[2] += t2 - ev
			s[3] += t3 - t2
			s[4] += t4 - t3
		}
		r, err := jsglue.Await(ctx, rawJS.Invoke(d.raw, n))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d, ms per transaction: issue %.3f / %.3f, read %.3f / %.3f, event -> Go %.3f / -, decide+write %.3f / %.3f, commit (to Go) %.3f / %.3f (Go / JS)",
			round, s[0]/n, r.Index(0).Float(), s[1]/n, r.Index(1).Float(), s[2]/n, s[3]/n, r.Index(2).Float(), s[4]/n, r.Index(3).Float())
	}
}

// med is the bench's figure: the median of the per-round ratios.
func med(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// TestApplyPhases is TestAllocatePhases for a fenced apply (DB.Apply's
// transaction: read the fence, decide, one app write, the advanced fence).
func TestApplyPhases(t *testing.T) {
	if os.Getenv("TABFENCE_PERF") == "" {
		t.Skip("set TABFENCE_PERF=1")
	}
	ctx := context.Background()
	d, err := Open(ctx, "tabfence-aphases-"+strconv.FormatInt(time.Now().UnixNano(), 36), WithSchema(Schema{Steps: []Step{{Version: 1, Upgrade: func(tx *UpgradeTx) error {
		return tx.CreateStore(benchStore, StoreOptions{})
	}}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	perf := js.Global().Get("performance")
	now := func() float64 { return perf.Call("now").Float() }
	stamp := js.Global().Get("Function").New("globalThis.__tabfenceStamp = performance.now()")
	rawJS := js.Global().Get("Function").New("db", "from", "n", `return (async () => {
  const s = [0, 0, 0, 0];
  for (let i = from; i < from + n; i++) {
    await new Promise((res, rej) => {
      const t0 = performance.now(); let t1, t2, t3;
      const tx = db.transaction(["tf_fences", "bench"], "readwrite");
      const st = tx.objectStore("tf_fences");
      const g = st.get("bench-js");
      t1 = performance.now();
      g.onsuccess = () => {
        t2 = performance.now();
        const id = "op" + i;
        let ids = g.result && g.result.recent ? g.result.recent.split("\n") : [];
        if (ids.includes(id)) { tx.abort(); return; }
        tx.objectStore("bench").put(i, "j" + i);
        ids.push(id);
        if (ids.length > 64) ids = ids.slice(ids.length - 64);
        st.put({resource: "bench-js", highest: 1, highestSeq: 0, recent: ids.join("\n")}, "bench-js");
        tx.commit();
        t3 = performance.now();
      };
      tx.oncomplete = () => { s[0] += t1 - t0; s[1] += t2 - t1; s[2] += t3 - t2; s[3] += performance.now() - t3; res(); };
      tx.onabort = () => rej(tx.error);
    });
  }
  return s.map((x) => x / n);
})()`)
	const n = 200
	resource := "bench-go"
	key := jsString(resource)
	scope, err := d.scope([]string{benchStore})
	if err != nil {
		t.Fatal(err)
	}
	var dec, dcd, wr, enc float64
	for round := 0; round < 5; round++ {
		var s [5]float64
		dec, dcd, wr, enc = 0, 0, 0, 0
		for i := 0; i < n; i++ {
			op := Op{Resource: resource, Token: 1, OperationID: "op" + strconv.Itoa(round*n+i)}
			t0 := now()
			tx, err := d.begin(ReadWrite, scope)
			if err != nil {
				t.Fatal(err)
			}
			fences := tx.Store(StoreFences)
			rq := fences.Get(key)
			rq.v.Call("addEventListener", "success", stamp)
			t1 := now()
			v, err := rq.await(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			t2 := now()
			ev := js.Global().Get("__tabfenceStamp").Float()
			rec, err := decodeFenceKey(v, resource, key)
			if err != nil {
				t.Fatal(err)
			}
			ta := now()
			res, next := Decide(rec, op, 0)
			if res != Accepted {
				t.Fatal(res)
			}
			tb := now()
			w := &WriteTx{tx: tx}
			if err := w.Put(benchStore, js.ValueOf("k"+strconv.Itoa(i)), js.ValueOf(i)); err != nil {
				t.Fatal(err)
			}
			tc := now()
			if err := fences.Put(key, encodeFence(next, key, v)).Err(); err != nil {
				t.Fatal(err)
			}
			_ = tx.Commit()
			t3 := now()
			if err := tx.Await(ctx); err != nil {
				t.Fatal(err)
			}
			t4 := now()
			dec += ta - t2
			dcd += tb - ta
			wr += tc - tb
			enc += t3 - tc
			s[0] += t1 - t0
			s[1] += ev - t1
			s[2] += t2 - ev
			s[3] += t3 - t2
			s[4] += t4 - t3
		}
		r, err := jsglue.Await(ctx, rawJS.Invoke(d.raw, round*n, n))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d, ms per transaction: issue %.3f / %.3f, read %.3f / %.3f, event -> Go %.3f / -, decide+write %.3f / %.3f (decode %.3f decide %.3f app put %.3f fence put+commit %.3f), commit (to Go) %.3f / %.3f (Go / JS)",
			round, s[0]/n, r.Index(0).Float(), s[1]/n, r.Index(1).Float(), s[2]/n, s[3]/n, r.Index(2).Float(), dec/n, dcd/n, wr/n, enc/n, s[4]/n, r.Index(3).Float())
	}
}
