//go:build js && wasm

package idb

import (
	"context"
	"os"
	"strconv"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/internal/benchjs"
	"github.com/tabfence/tabfence/jsglue"
)

// TestAllocatePhases splits one token allocation's transaction into its
// phases, in Go (this package's layer) and in raw JavaScript (the bench's
// transaction, internal/benchjs's idb.js), alternating:
// issuing (transaction, store, get), waiting for the read, the read's event
// reaching Go (from a listener registered before Go's to the goroutine
// running again), the decision and writes, and the commit until Go runs
// again. Figures only: where the Go side's extra time per transaction goes.
// It times the Go path (the one pages without the loader take),
// issuing its requests itself.
func TestAllocatePhases(t *testing.T) {
	if os.Getenv("TABFENCE_PERF") == "" {
		t.Skip("set TABFENCE_PERF=1")
	}
	ctx := context.Background()
	d, err := Open(ctx, "tabfence-phases-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	require.NoError(t, err)
	defer d.Close()
	rawJS, err := benchjs.IDB()
	require.NoError(t, err)
	const n = 200
	key := raw.JSString("phases-go")
	for round := 0; round < 4; round++ {
		s := goPhases(t, n, func(int) (*raw.Tx, raw.Store, *raw.Request) {
			tx, err := d.begin(raw.ReadWrite, d.scopeEpochs)
			if err != nil {
				t.Fatal(err)
			}
			st := tx.Store(StoreEpochs)
			return tx, st, st.Get(key)
		}, func(_ int, tx *raw.Tx, st raw.Store, v js.Value) {
			epoch, err := epochOf(v, "phases-go", key)
			if err != nil {
				t.Fatal(err)
			}
			rec := EpochRecord{Resource: "phases-go", Epoch: epoch + 1, OwnerID: "bench", UpdatedAt: time.Now().UnixMilli()}
			if err := st.Put(key, d.encodeEpoch(rec, key, v)).Err(); err != nil {
				t.Fatal(err)
			}
		})
		r, err := jsglue.Await(ctx, rawJS.Call("phases", d.conn, "allocate", "phases-js", round*n, n))
		require.NoError(t, err)
		t.Logf("round %d, ms per transaction: issue %.3f / %.3f, read %.3f / %.3f, event -> Go %.3f / -, decide+write %.3f / %.3f, commit (to Go) %.3f / %.3f (Go / JS)",
			round, s[0], r.Index(0).Float(), s[1], r.Index(1).Float(), s[2], s[3], r.Index(2).Float(), s[4], r.Index(3).Float())
	}
}

// TestApplyPhases is TestAllocatePhases for a fenced apply (DB.Apply's
// transaction: read the fence, decide, one app write, the advanced fence),
// with the decide+write phase split further.
func TestApplyPhases(t *testing.T) {
	if os.Getenv("TABFENCE_PERF") == "" {
		t.Skip("set TABFENCE_PERF=1")
	}
	ctx := context.Background()
	d, err := Open(ctx, "tabfence-aphases-"+strconv.FormatInt(time.Now().UnixNano(), 36), WithSchema(Schema{Steps: []Step{{Version: 1, Upgrade: func(tx *UpgradeTx) error {
		return tx.CreateStore(benchjs.IDBStore, StoreOptions{})
	}}}}))
	require.NoError(t, err)
	defer d.Close()
	rawJS, err := benchjs.IDB()
	require.NoError(t, err)
	const n = 200
	resource := "bench-go"
	key := raw.JSString(resource)
	scope, err := d.scope([]string{benchjs.IDBStore})
	require.NoError(t, err)
	for round := 0; round < 5; round++ {
		var dec, dcd, wr, enc float64 // decode, decide, app put, fence put and commit
		s := goPhases(t, n, func(int) (*raw.Tx, raw.Store, *raw.Request) {
			tx, err := d.begin(raw.ReadWrite, scope)
			if err != nil {
				t.Fatal(err)
			}
			tx.Store(StoreEpochs).Get(key) // as fenced: the allocation record first
			fences := tx.Store(StoreFences)
			return tx, fences, fences.Get(key)
		}, func(i int, tx *raw.Tx, fences raw.Store, v js.Value) {
			t0 := perfNow()
			rec, err := decodeFenceKey(v, resource, key)
			if err != nil {
				t.Fatal(err)
			}
			ta := perfNow()
			res, next := Decide(rec, 0, Op{Resource: resource, Token: 1, OperationID: "op" + strconv.Itoa(round*n+i)}, 0)
			if res != Accepted {
				t.Fatal(res)
			}
			tb := perfNow()
			w := &WriteTx{tx: tx}
			if err := w.Put(benchjs.IDBStore, js.ValueOf("k"+strconv.Itoa(i)), js.ValueOf(i)); err != nil {
				t.Fatal(err)
			}
			tc := perfNow()
			if err := fences.Put(key, encodeFence(next, key, v)).Err(); err != nil {
				t.Fatal(err)
			}
			dec, dcd, wr, enc = dec+ta-t0, dcd+tb-ta, wr+tc-tb, enc+perfNow()-tc
		})
		r, err := jsglue.Await(ctx, rawJS.Call("phases", d.conn, "apply", "bench-js", round*n, n))
		require.NoError(t, err)
		t.Logf("round %d, ms per transaction: issue %.3f / %.3f, read %.3f / %.3f, event -> Go %.3f / -, decide+write %.3f / %.3f (decode %.3f decide %.3f app put %.3f fence put %.3f), commit (to Go) %.3f / %.3f (Go / JS)",
			round, s[0], r.Index(0).Float(), s[1], r.Index(1).Float(), s[2], s[3], r.Index(2).Float(), dec/n, dcd/n, wr/n, enc/n, s[4], r.Index(3).Float())
	}
}

var perf = js.Global().Get("performance")

func perfNow() float64 { return perf.Call("now").Float() }

// goPhases times n transactions of the Go path and returns the mean ms of
// each phase: issuing (issue returns the transaction, the store read and
// the read), the read, its event reaching Go (from a listener registered
// before Go's), decide+write (write, then the commit call), and the commit
// until Go runs again.
func goPhases(t *testing.T, n int, issue func(i int) (*raw.Tx, raw.Store, *raw.Request), write func(i int, tx *raw.Tx, st raw.Store, v js.Value)) (s [5]float64) {
	t.Helper()
	stamp := js.Global().Get("Function").New("globalThis.__tabfenceStamp = performance.now()")
	for i := 0; i < n; i++ {
		t0 := perfNow()
		tx, st, rq := issue(i)
		rq.JS().Call("addEventListener", "success", stamp)
		t1 := perfNow()
		v, err := rq.Await(context.Background())
		require.NoError(t, err)
		t2 := perfNow()
		ev := js.Global().Get("__tabfenceStamp").Float()
		write(i, tx, st, v)
		_ = tx.Commit()
		t3 := perfNow()
		require.NoError(t, tx.Await(context.Background()))
		t4 := perfNow()
		for k, d := range [5]float64{t1 - t0, ev - t1, t2 - ev, t3 - t2, t4 - t3} {
			s[k] += d / float64(n)
		}
	}
	return s
}
