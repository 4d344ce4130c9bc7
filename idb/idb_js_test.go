//go:build js && wasm

package idb

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/locks"
)

var dbSeq int

func dbName(t *testing.T) string {
	dbSeq++
	return "test-" + t.Name() + "-" + strconv.Itoa(dbSeq)
}

func itemsSchema() Schema {
	return Schema{Steps: []Step{{Version: 1, Upgrade: func(tx *UpgradeTx) error {
		return tx.CreateStore("items", StoreOptions{})
	}}}}
}

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, name string, opts ...Option) *DB {
	t.Helper()
	d, err := Open(ctx5(t), name, opts...)
	require.NoError(t, err, "Open")
	t.Cleanup(func() { d.Close() })
	return d
}

// js runs an async JavaScript function body with the database name as
// `name` and awaits its result.
func runJS(t *testing.T, name, body string) js.Value {
	t.Helper()
	fn := js.Global().Get("Function").New("name", "return (async () => {"+body+"})()")
	v, err := jsglue.Await(ctx5(t), fn.Invoke(name))
	require.NoError(t, err, "js")
	return v
}

const rawPut = `
const db = await new Promise((res, rej) => { const r = indexedDB.open(name); r.onsuccess = () => res(r.result); r.onerror = () => rej(r.error); });
await new Promise((res, rej) => { const tx = db.transaction(store, "readwrite"); tx.objectStore(store).put(value, key); tx.oncomplete = res; tx.onerror = () => rej(tx.error); });
db.close();`

// allocPaths is applyPaths for AllocateToken.
func allocPaths(t *testing.T, f func(t *testing.T)) { applyPaths(t, f) }

// applyPaths runs f twice: through the loader's idb hooks and export
// (withHooks), as a page that uses the loader, and without them.
func applyPaths(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	t.Run("js", func(t *testing.T) {
		withHooks(t)
		f(t)
	})
	t.Run("go", f)
}

func TestAllocateTokenIncreases(t *testing.T) { allocPaths(t, testAllocateTokenIncreases) }

func testAllocateTokenIncreases(t *testing.T) {
	d := open(t, dbName(t))
	ctx := ctx5(t)
	for want := uint64(1); want <= 5; want++ {
		got, err := d.AllocateToken(ctx, "res", "tab-a")
		require.NoError(t, err, "token")
		require.Equal(t, want, got, "token")
	}
	got, _ := d.AllocateToken(ctx, "other", "tab-a")
	require.Equal(t, uint64(1), got, "tokens are per resource")
	rec, err := d.Epoch(ctx, "res")
	require.NoError(t, err, "%+v", rec)
	require.Equal(t, uint64(5), rec.Epoch, "%+v", rec)
	require.Equal(t, "tab-a", rec.OwnerID, "%+v", rec)
	require.NotEqual(t, int64(0), rec.UpdatedAt, "%+v", rec)
	_, err = d.AllocateToken(ctx, "", "x")
	require.ErrorIs(t, err, ErrInvalidOp)
}

func TestAllocateTokenConcurrentConnectionsUnique(t *testing.T) {
	allocPaths(t, testAllocateTokenConcurrentConnectionsUnique)
}

func testAllocateTokenConcurrentConnectionsUnique(t *testing.T) {
	name := dbName(t)
	conns := []*DB{open(t, name), open(t, name), open(t, name)}
	ctx := ctx5(t)
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, c := range conns {
		wg.Add(1)
		go func(c *DB) {
			defer wg.Done()
			var last uint64
			for i := 0; i < 30; i++ {
				tok, err := c.AllocateToken(ctx, "res", "owner")
				if err != nil {
					errs <- err
					return
				}
				if tok <= last {
					errs <- errors.New("not increasing")
					return
				}
				last = tok
				mu.Lock()
				if seen[tok] {
					mu.Unlock()
					errs <- errors.New("duplicate token " + strconv.FormatUint(tok, 10))
					return
				}
				seen[tok] = true
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	require.Len(t, seen, 90, "%d tokens", len(seen))
}

func putItem(key, value string) func(*WriteTx) error {
	return func(tx *WriteTx) error { return tx.Put("items", js.ValueOf(key), js.ValueOf(value)) }
}

func item(t *testing.T, d *DB, key string) string {
	t.Helper()
	v, err := d.Get(ctx5(t), "items", js.ValueOf(key))
	require.NoError(t, err)
	if v.IsUndefined() {
		return "<none>"
	}
	return v.String()
}

func TestApplyAcceptedDuplicateStale(t *testing.T) { applyPaths(t, testApplyAcceptedDuplicateStale) }

func testApplyAcceptedDuplicateStale(t *testing.T) {
	d := open(t, dbName(t), WithSchema(itemsSchema()))
	ctx := ctx5(t)
	res, err := d.Apply(ctx, Op{Resource: "r", Token: 2, OperationID: "op-1", Sequence: 1}, putItem("k", "v2"))
	require.NoError(t, err)
	require.Equal(t, Accepted, res)
	// Same operation again: nothing written twice.
	res, err = d.Apply(ctx, Op{Resource: "r", Token: 2, OperationID: "op-1", Sequence: 1}, putItem("k", "again"))
	require.NoError(t, err)
	require.Equal(t, Duplicate, res)
	require.Equal(t, "v2", item(t, d, "k"))
	// Older token: stale, nothing written.
	res, err = d.Apply(ctx, Op{Resource: "r", Token: 1, OperationID: "op-old"}, putItem("k", "v1"))
	require.NoError(t, err)
	require.Equal(t, Stale, res)
	require.Equal(t, "v2", item(t, d, "k"))
	// Same token, next op: accepted.
	res, err = d.Apply(ctx, Op{Resource: "r", Token: 2, OperationID: "op-2", Sequence: 2}, putItem("k", "v2b"))
	require.NoError(t, err)
	require.Equal(t, Accepted, res)
	require.Equal(t, "v2b", item(t, d, "k"))
	// Higher token: accepted, sequence reset.
	res, err = d.Apply(ctx, Op{Resource: "r", Token: 3, OperationID: "op-3", Sequence: 1}, putItem("k", "v3"))
	require.NoError(t, err)
	require.Equal(t, Accepted, res)
	f, err := d.Fence(ctx, "r")
	require.NoError(t, err, "%+v", f)
	require.Equal(t, uint64(3), f.Highest, "%+v", f)
	require.Equal(t, uint64(1), f.HighestSeq, "%+v", f)
	require.Len(t, f.Recent, 3, "%+v", f)
	// Fence-only apply (nil writes) and all-stores scope.
	res, err = d.Apply(ctx, Op{Resource: "r", Token: 4, OperationID: "op-4"}, nil)
	require.NoError(t, err)
	require.Equal(t, Accepted, res)
}

// A steal deposes the old owner the moment the thief's token is
// allocated: the old token's next apply is stale at once, before the new
// owner wrote anything, and writes nothing. A token above every allocated
// one (a server's) is still accepted.
func TestApplyStaleOnceNewerTokenAllocated(t *testing.T) {
	applyPaths(t, testApplyStaleOnceNewerTokenAllocated)
}

func testApplyStaleOnceNewerTokenAllocated(t *testing.T) {
	d := open(t, dbName(t), WithSchema(itemsSchema()))
	ctx := ctx5(t)
	old, err := d.AllocateToken(ctx, "r", "tab-a")
	require.NoError(t, err)
	res, err := d.Apply(ctx, Op{Resource: "r", Token: old, OperationID: "a-1", Sequence: 1}, putItem("k", "a"))
	require.NoError(t, err)
	require.Equal(t, Accepted, res)
	thief, err := d.AllocateToken(ctx, "r", "tab-b")
	require.NoError(t, err)
	require.Equal(t, old+1, thief)
	// The old owner again, at once: its next op, a retry of an op it
	// applied, and a fence-only apply are all stale.
	for _, op := range []Op{
		{Resource: "r", Token: old, OperationID: "a-2", Sequence: 2},
		{Resource: "r", Token: old, OperationID: "a-1", Sequence: 1},
		{Resource: "r", Token: old, OperationID: "a-3"},
	} {
		res, err := d.Apply(ctx, op, putItem("k", "stale"))
		require.NoError(t, err, "%+v: %v %v, want stale", op, res, err)
		require.Equal(t, Stale, res, "%+v: %v %v, want stale", op, res, err)
	}
	got := item(t, d, "k")
	require.Equal(t, "a", got, "store changed to %s", got)
	f, _ := d.Fence(ctx, "r")
	require.Equal(t, old, f.Highest, "a stale apply moved the fence to %d", f.Highest)
	res, err = d.Apply(ctx, Op{Resource: "r", Token: thief, OperationID: "b-1", Sequence: 1}, putItem("k", "b"))
	require.NoError(t, err)
	require.Equal(t, Accepted, res)
	res, err = d.Apply(ctx, Op{Resource: "r", Token: 1000, OperationID: "server"}, putItem("k", "s"))
	require.NoError(t, err, "token above the allocated epoch")
	require.Equal(t, Accepted, res, "token above the allocated epoch")
	// Another resource's allocations do not depose anyone here.
	res, err = d.Apply(ctx, Op{Resource: "other", Token: 1, OperationID: "o"}, nil)
	require.NoError(t, err)
	require.Equal(t, Accepted, res)
}

// A corrupt allocation record is a typed error for Apply (both paths),
// never a silent "not allocated", and nothing is written.
func TestApplyCorruptEpochIsTypedError(t *testing.T) {
	applyPaths(t, testApplyCorruptEpochIsTypedError)
}

func testApplyCorruptEpochIsTypedError(t *testing.T) {
	name := dbName(t)
	d := open(t, name, WithSchema(itemsSchema()))
	for _, g := range []string{`null`, `"str"`, `({resource: "r", epoch: "3", ownerId: "o", updatedAt: 1})`,
		`({resource: "other", epoch: 3, ownerId: "o", updatedAt: 1})`, `({resource: "r", epoch: 2**60, ownerId: "o", updatedAt: 1})`} {
		runJS(t, name, `const store = "tf_epochs", key = "r", value = (`+g+`);`+rawPut)
		_, err := d.Apply(ctx5(t), Op{Resource: "r", Token: 9, OperationID: "x"}, putItem("k", "v"))
		assert.ErrorIs(t, err, ErrCorruptRecord, "epoch %s", g)
	}
	require.Equal(t, "<none>", item(t, d, "k"), "a corrupt epoch let a write through")
}

func TestApplyAbortLeavesFenceAndDataUnchanged(t *testing.T) {
	applyPaths(t, testApplyAbortLeavesFenceAndDataUnchanged)
}

func testApplyAbortLeavesFenceAndDataUnchanged(t *testing.T) {
	d := open(t, dbName(t), WithSchema(itemsSchema()))
	ctx := ctx5(t)
	if res, err := d.Apply(ctx, Op{Resource: "r", Token: 1, OperationID: "base"}, putItem("k", "base")); err != nil || res != Accepted {
		t.Fatal(res, err)
	}
	before, _ := d.Fence(ctx, "r")
	check := func(label string) {
		t.Helper()
		f, err := d.Fence(ctx, "r")
		require.NoError(t, err, "%s: fence changed: %+v", label, f)
		require.Equal(t, before.Highest, f.Highest, "%s: fence changed: %+v", label, f)
		require.Len(t, f.Recent, len(before.Recent), "%s: fence changed: %+v", label, f)
		require.Equal(t, "base", item(t, d, "k"), "%s: data changed", label)
		require.Equal(t, "<none>", item(t, d, "k2"), "%s: partial write visible", label)
	}
	boom := errors.New("boom")
	// 1. The caller's function fails after writing.
	_, err := d.Apply(ctx, Op{Resource: "r", Token: 5, OperationID: "a"}, func(tx *WriteTx) error {
		if err := tx.Put("items", js.ValueOf("k"), js.ValueOf("new")); err != nil {
			return err
		}
		_ = tx.Put("items", js.ValueOf("k2"), js.ValueOf("new"))
		return boom
	})
	require.ErrorIs(t, err, boom)
	check("writes error")
	// 2. A request throws synchronously (an object is not a valid key).
	_, err = d.Apply(ctx, Op{Resource: "r", Token: 5, OperationID: "b"}, func(tx *WriteTx) error {
		_ = tx.Put("items", js.ValueOf("k2"), js.ValueOf("new"))
		return tx.Put("items", js.Global().Get("Object").New(), js.ValueOf(1))
	})
	require.ErrorIs(t, err, jsglue.ErrData, "want DataError")
	check("sync request error")
	// 3. A request fails asynchronously mid-way (Add on an existing key).
	_, err = d.Apply(ctx, Op{Resource: "r", Token: 5, OperationID: "c"}, func(tx *WriteTx) error {
		_ = tx.Put("items", js.ValueOf("k2"), js.ValueOf("new"))
		return tx.Add("items", js.ValueOf("k"), js.ValueOf("dup"))
	})
	require.ErrorIs(t, err, jsglue.ErrConstraint, "want ConstraintError")
	check("async request error")
	// 4. A panic in writes aborts too.
	_, err = d.Apply(ctx, Op{Resource: "r", Token: 5, OperationID: "d"}, func(tx *WriteTx) error {
		_ = tx.Put("items", js.ValueOf("k2"), js.ValueOf("new"))
		panic("oops")
	})
	require.Error(t, err, "panic not reported")
	check("panic")
	// 5. Waiting on a timer mid-transaction kills it: the documented rule.
	_, err = d.Apply(ctx, Op{Resource: "r", Token: 5, OperationID: "e"}, func(tx *WriteTx) error {
		time.Sleep(20 * time.Millisecond)
		return tx.Put("items", js.ValueOf("k2"), js.ValueOf("new"))
	})
	if !errors.Is(err, ErrTransactionEnded) || !(errors.Is(err, jsglue.ErrTransactionInactive) || errors.Is(err, jsglue.ErrInvalidState)) {
		t.Fatalf("want ErrTransactionEnded, got %v", err)
	}
	check("timer")
	// Waiting after a write: the caller broke the rule, and is told so.
	_, err = d.Apply(ctx, Op{Resource: "r", Token: 5, OperationID: "e2"}, func(tx *WriteTx) error {
		_ = tx.Put("items", js.ValueOf("k3"), js.ValueOf("orphan"))
		time.Sleep(20 * time.Millisecond)
		return nil
	})
	require.ErrorIs(t, err, ErrTransactionEnded, "want ErrTransactionEnded")
	f, _ := d.Fence(ctx, "r")
	require.Equal(t, before.Highest, f.Highest, "fence advanced by a broken transaction")
	// Reserved stores and use after return.
	var leaked *WriteTx
	_, err = d.Apply(ctx, Op{Resource: "r", Token: 5, OperationID: "f"}, func(tx *WriteTx) error {
		leaked = tx
		return tx.Put(StoreFences, js.ValueOf("r"), js.ValueOf(1))
	})
	require.ErrorIs(t, err, ErrReservedStore)
	require.ErrorIs(t, leaked.Put("items", js.ValueOf("x"), js.ValueOf(1)), ErrTxDone)
	check("reserved")
	// Then a good op still works.
	res, err := d.Apply(ctx, Op{Resource: "r", Token: 5, OperationID: "g"}, func(tx *WriteTx) error {
		v, err := tx.Get("items", js.ValueOf("k"))
		if err != nil {
			return err
		}
		return tx.Put("items", js.ValueOf("k2"), js.ValueOf(v.String()+"+"))
	}, "items")
	require.NoError(t, err)
	require.Equal(t, Accepted, res)
	require.Equal(t, "base+", item(t, d, "k2"))
}

func TestApplyCancelledContext(t *testing.T) { applyPaths(t, testApplyCancelledContext) }

func testApplyCancelledContext(t *testing.T) {
	d := open(t, dbName(t), WithSchema(itemsSchema()))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := d.Apply(ctx, Op{Resource: "r", Token: 1, OperationID: "a"}, putItem("k", "v"))
	require.ErrorIs(t, err, context.Canceled)
	_, err = d.AllocateToken(ctx, "r", "o")
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, "<none>", item(t, d, "k"), "written")
}

func TestCompareAndSwap(t *testing.T) {
	d := open(t, dbName(t), WithSchema(itemsSchema()))
	ctx := ctx5(t)
	steps := []struct {
		token uint64
		value string
		want  bool
		after string
	}{{2, "a", true, "a"}, {2, "b", true, "b"}, {1, "old", false, "b"}, {3, "c", true, "c"}, {2, "late", false, "c"}}
	for i, s := range steps {
		ok, err := d.CompareAndSwap(ctx, "", "items", "key", s.token, js.ValueOf(s.value))
		require.NoError(t, err, "step %d", i)
		require.Equal(t, s.want, ok, "step %d", i)
		require.Equal(t, s.after, item(t, d, "key"), "step %d", i)
	}
	_, err := d.CompareAndSwap(ctx, "", StoreEpochs, "x", 1, js.ValueOf(1))
	require.ErrorIs(t, err, ErrReservedStore)
	// Named with its resource, a token below the resource's allocated
	// epoch is refused before the newer owner wrote the key.
	old, _ := d.AllocateToken(ctx, "res", "a")
	ok, err := d.CompareAndSwap(ctx, "res", "items", "k2", old, js.ValueOf("a"))
	require.True(t, ok)
	require.NoError(t, err)
	_, err = d.AllocateToken(ctx, "res", "b")
	require.NoError(t, err)
	ok, err = d.CompareAndSwap(ctx, "res", "items", "k2", old, js.ValueOf("stale"))
	require.False(t, ok, "old token after a newer allocation")
	require.NoError(t, err, "old token after a newer allocation")
	require.Equal(t, "a", item(t, d, "k2"), "old token after a newer allocation")
	ok, err = d.CompareAndSwap(ctx, "res", "items", "k2", old+1, js.ValueOf("b"))
	require.True(t, ok)
	require.NoError(t, err)
}

func TestCorruptRecordsAreTypedErrors(t *testing.T) { applyPaths(t, testCorruptRecordsAreTypedErrors) }

func testCorruptRecordsAreTypedErrors(t *testing.T) {
	name := dbName(t)
	d := open(t, name, WithSchema(itemsSchema()))
	ctx := ctx5(t)
	garbage := []string{
		`null`, `42`, `"str"`, `[]`, `true`,
		`({})`,
		`({resource: "r", highest: "7", highestSeq: 0, recent: ""})`,
		`({resource: "r", highest: -1, highestSeq: 0, recent: ""})`,
		`({resource: "r", highest: 1.5, highestSeq: 0, recent: ""})`,
		`({resource: "r", highest: NaN, highestSeq: 0, recent: ""})`,
		`({resource: "r", highest: 2**60, highestSeq: 0, recent: ""})`,
		`({resource: "r", highest: Infinity, highestSeq: 0, recent: ""})`,
		`({resource: "other", highest: 1, highestSeq: 0, recent: ""})`,
		`({resource: "r", highest: 1, highestSeq: 0})`,
		`({resource: "r", highest: 1, highestSeq: 0, recent: ["a"]})`,
		`({resource: "r", highest: 1, highestSeq: 0, recent: 5})`,
		`({resource: "r", highest: 1, highestSeq: 0, recent: "a\n\nb"})`,
		`({resource: "r", highest: 1, highestSeq: 0, recent: "a\tb"})`,
		`({resource: "r", highest: 1, highestSeq: 0, recent: "x".repeat(300)})`,
		`({resource: "r", highest: 1, highestSeq: 0, recent: "x".repeat(2e6)})`,
		`({resource: "r", highest: 1, highestSeq: "0", recent: ""})`,
		`({resource: 7, highest: 1, highestSeq: 0, recent: ""})`,
		`new Date()`, `new Map([["highest", 1]])`, `new Uint8Array(4)`,
	}
	for _, g := range garbage {
		runJS(t, name, `const store = "tf_fences", key = "r", value = (`+g+`);`+rawPut)
		_, err := d.Apply(ctx, Op{Resource: "r", Token: 9, OperationID: "x"}, putItem("k", "v"))
		assert.ErrorIs(t, err, ErrCorruptRecord, "fence %s", g)
		_, err = d.Fence(ctx, "r")
		assert.ErrorIs(t, err, ErrCorruptRecord, "Fence read %s", g)
		_, err = d.CompareAndSwap(ctx, "", "items", "cask", 1, js.ValueOf(1))
		assert.NoError(t, err, "CAS on another key must be unaffected")
	}
	require.Equal(t, "<none>", item(t, d, "k"), "corrupt fence let a write through")
}

// Corrupt epoch records give ErrCorruptRecord, and an exhausted resource
// ErrTokenExhausted, on both paths: the JavaScript half leaves them to Go.
func TestAllocateTokenCorruptEpochs(t *testing.T) {
	allocPaths(t, func(t *testing.T) {
		name := dbName(t)
		d := open(t, name)
		ctx := ctx5(t)
		for _, g := range []string{`null`, `"7"`, `({resource: "e", epoch: "7", ownerId: "", updatedAt: 0})`,
			`({resource: "e", epoch: 3, ownerId: 1, updatedAt: 0})`, `({resource: "e", epoch: 3, ownerId: "", updatedAt: -5})`,
			`({resource: "e", ownerId: "", updatedAt: 0})`, `({resource: "e", epoch: 2**53, ownerId: "", updatedAt: 0})`,
			`({resource: "f", epoch: 3, ownerId: "", updatedAt: 0})`, `({resource: "e", epoch: 1.5, ownerId: "", updatedAt: 0})`,
			`({resource: "e", epoch: 3, ownerId: "x".repeat(256), updatedAt: 0})`, `[3]`} {
			runJS(t, name, `const store = "tf_epochs", key = "e", value = (`+g+`);`+rawPut)
			_, err := d.AllocateToken(ctx, "e", "o")
			assert.ErrorIs(t, err, ErrCorruptRecord, "epoch %s", g)
		}
		// The largest token is kept exact; the next one is refused.
		runJS(t, name, `const store = "tf_epochs", key = "e", value = {resource: "e", epoch: 2**53-2, ownerId: "", updatedAt: 0};`+rawPut)
		if tok, err := d.AllocateToken(ctx, "e", "o"); err != nil || tok != MaxToken {
			t.Fatal(tok, err)
		}
		if _, err := d.AllocateToken(ctx, "e", "o"); !errors.Is(err, ErrTokenExhausted) {
			t.Fatal(err)
		}
		rec, err := d.Epoch(ctx, "e")
		if err != nil || rec.Epoch != MaxToken {
			t.Fatalf("a refused allocation wrote: %+v %v", rec, err)
		}
	})
}

// The two paths write the same record: they alternate on one resource with
// strictly increasing tokens, and a field another version of tabfence added
// to the record survives both.
func TestAllocateTokenPathsAgree(t *testing.T) {
	name := dbName(t)
	goSide := open(t, name)
	withHooks(t)
	hookSide := open(t, name)
	require.Equal(t, js.TypeFunction, hookSide.allocHook.Type())
	require.Equal(t, js.TypeUndefined, goSide.allocHook.Type())
	ctx := ctx5(t)
	runJS(t, name, `const store = "tf_epochs", key = "r", value = {resource: "r", epoch: 4, ownerId: "old", updatedAt: 1, extra: "kept"};`+rawPut)
	for i, want := 0, uint64(5); i < 6; i, want = i+1, want+1 {
		d := hookSide
		if i%2 == 1 {
			d = goSide
		}
		before := time.Now().UnixMilli()
		got, err := d.AllocateToken(ctx, "r", "tab-"+strconv.Itoa(i))
		require.NoError(t, err, "allocation %d", i)
		require.Equal(t, want, got, "allocation %d", i)
		v, err := d.Get(ctx, StoreEpochs, js.ValueOf("r"))
		require.NoError(t, err)
		rec, err := decodeEpoch(v, "r")
		require.NoError(t, err, "allocation %d wrote %+v", i, rec)
		require.Equal(t, want, rec.Epoch, "allocation %d wrote %+v", i, rec)
		require.Equal(t, "tab-"+strconv.Itoa(i), rec.OwnerID, "allocation %d wrote %+v", i, rec)
		require.GreaterOrEqual(t, rec.UpdatedAt, before, "allocation %d wrote %+v", i, rec)
		x := v.Get("extra")
		require.Equal(t, js.TypeString, x.Type(), "allocation %d lost a foreign field", i)
		require.Equal(t, "kept", x.String(), "allocation %d lost a foreign field", i)
	}
}

// The two Apply paths decide alike and write the same record: the same
// operations go to two databases, one through each path, through accepted,
// duplicate (by ID, by sequence, by an ID remembered across tokens) and
// stale operations with a window of three IDs; a foreign field survives
// both; an operation ID the JavaScript half does not judge (not ASCII) is
// remembered all the same, and the record holding it is then read by Go.
func TestApplyPathsAgree(t *testing.T) {
	ctx := ctx5(t)
	type side struct {
		name string
		d    *DB
	}
	var sides []side
	for _, fast := range []bool{false, true} { // the hooks stay installed once installed
		name := dbName(t) + "-" + strconv.Itoa(len(sides))
		if fast {
			withHooks(t)
		}
		d := open(t, name, WithSchema(itemsSchema()), WithRecentOps(3))
		require.Equal(t, fast, d.applyHook.Type() == js.TypeFunction)
		runJS(t, name, `const store = "tf_fences", key = "r", value = {resource: "r", highest: 2, highestSeq: 1, recent: "a", extra: "kept"};`+rawPut)
		sides = append(sides, side{[]string{"go", "js"}[len(sides)], d})
	}
	steps := []struct {
		op         Op
		want       Result
		highest    uint64
		highestSeq uint64
		recent     string
	}{
		{Op{Token: 2, OperationID: "a"}, Duplicate, 2, 1, "a"},                                               // the ID
		{Op{Token: 2, OperationID: "b", Sequence: 1}, Duplicate, 2, 1, "a"},                                  // the sequence
		{Op{Token: 2, OperationID: "b", Sequence: 2}, Accepted, 2, 2, "a\nb"},                                // next in the stream
		{Op{Token: 2, OperationID: "c"}, Accepted, 2, 2, "a\nb\nc"},                                          // unsequenced
		{Op{Token: 3, OperationID: "d", Sequence: 1}, Accepted, 3, 1, "b\nc\nd"},                             // newer token; the window slides
		{Op{Token: 3, OperationID: "b", Sequence: 9}, Duplicate, 3, 1, "b\nc\nd"},                            // remembered across tokens
		{Op{Token: 2, OperationID: "e"}, Stale, 3, 1, "b\nc\nd"},                                             // older token
		{Op{Token: 3, OperationID: "é", Sequence: 2}, Accepted, 3, 2, "c\nd\né"},                             // not ASCII
		{Op{Token: 3, OperationID: "é"}, Duplicate, 3, 2, "c\nd\né"},                                         // Go reads that record
		{Op{Token: 4, OperationID: "f"}, Accepted, 4, 0, "d\né\nf"},                                          // and advances it
		{Op{Token: 4, OperationID: "g", Sequence: 5}, Accepted, 4, 5, "é\nf\ng"},                             // the ID leaves the window
		{Op{Token: 4, OperationID: "h", Sequence: 3}, Duplicate, 4, 5, "é\nf\ng"},                            // below the highest sequence
		{Op{Token: 4, OperationID: "i", Sequence: 6}, Accepted, 4, 6, "f\ng\ni"},                             // ASCII again
		{Op{Token: MaxToken, OperationID: "j", Sequence: MaxToken}, Accepted, MaxToken, MaxToken, "g\ni\nj"}, // exact at 2^53-1
	}
	for i, s := range steps {
		for _, sd := range sides {
			op := s.op
			op.Resource = "r"
			key := "k" + strconv.Itoa(i)
			res, err := sd.d.Apply(ctx, op, putItem(key, "v"))
			require.NoError(t, err, "step %d (%s)", i, sd.name)
			require.Equal(t, s.want, res, "step %d (%s)", i, sd.name)
			v, err := sd.d.Get(ctx, StoreFences, js.ValueOf("r"))
			require.NoError(t, err)
			rec, err := decodeFence(v, "r")
			require.NoError(t, err, "step %d (%s) stored %+v", i, sd.name, rec)
			require.Equal(t, s.highest, rec.Highest, "step %d (%s) stored %+v", i, sd.name, rec)
			require.Equal(t, s.highestSeq, rec.HighestSeq, "step %d (%s) stored %+v", i, sd.name, rec)
			require.Equal(t, s.recent, joinSep(rec.Recent, '\n'), "step %d (%s) stored %+v", i, sd.name, rec)
			x := v.Get("extra")
			require.Equal(t, js.TypeString, x.Type(), "step %d (%s) lost a foreign field", i, sd.name)
			require.Equal(t, "kept", x.String(), "step %d (%s) lost a foreign field", i, sd.name)
			require.Equal(t, res == Accepted, item(t, sd.d, key) == "v", "step %d (%s): the write and the verdict disagree", i, sd.name)
		}
	}
}

func waitEvent(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return Event{}
}

func TestDeleteMakesConnectionLetGo(t *testing.T) {
	name := dbName(t)
	events := make(chan Event, 4)
	base := jsglue.LiveCallbacks()
	d, err := Open(ctx5(t), name, WithEvents(func(e Event) { events <- e }))
	require.NoError(t, err)
	_, err = d.AllocateToken(ctx5(t), "r", "o")
	require.NoError(t, err)
	blocked := make(chan Event, 1)
	require.NoError(t, Delete(ctx5(t), name, func(e Event) { blocked <- e }))
	e := waitEvent(t, events)
	require.Equal(t, Deleted, e.Kind, "%+v", e)
	require.Equal(t, uint64(0), e.NewVersion, "%+v", e)
	require.Equal(t, uint64(1), e.OldVersion, "%+v", e)
	require.Equal(t, name, e.Name, "%+v", e)
	select {
	case <-d.Done():
	default:
		t.Fatal("Done not closed")
	}
	require.ErrorIs(t, d.Err(), ErrDeleted)
	_, err = d.AllocateToken(ctx5(t), "r", "o")
	require.ErrorIs(t, err, ErrDeleted)
	require.Empty(t, blocked, "the delete was blocked")
	require.Equal(t, base, jsglue.LiveCallbacks(), "callbacks leaked")
	// A new connection starts from an empty database.
	d2 := open(t, name)
	tok, err := d2.AllocateToken(ctx5(t), "r", "o")
	require.NoError(t, err)
	require.Equal(t, uint64(1), tok)
}

func TestUpgradeByNewerBuild(t *testing.T) {
	name := dbName(t)
	events := make(chan Event, 4)
	old := open(t, name, WithSchema(itemsSchema()), WithEvents(func(e Event) { events <- e }))
	_, err := old.AllocateToken(ctx5(t), "r", "o")
	require.NoError(t, err)
	s := itemsSchema()
	s.Steps = append(s.Steps, Step{Version: 3, Upgrade: func(tx *UpgradeTx) error {
		if tx.OldVersion != 1 || tx.NewVersion != 3 {
			return errors.New("versions " + strconv.FormatUint(tx.OldVersion, 10))
		}
		if err := tx.CreateIndex("items", "byX", "x", false); err != nil {
			return err
		}
		return tx.CreateStore("more", StoreOptions{KeyPath: "id"})
	}})
	blocked := make(chan Event, 1)
	nu := open(t, name, WithSchema(s), WithEvents(func(e Event) { blocked <- e }))
	e := waitEvent(t, events)
	require.Equal(t, Upgraded, e.Kind, "%+v", e)
	require.Equal(t, uint64(3), e.NewVersion, "%+v", e)
	require.Equal(t, uint64(1), e.OldVersion, "%+v", e)
	require.ErrorIs(t, old.Err(), ErrUpgraded)
	require.Empty(t, blocked, "upgrade was blocked")
	// Data and tokens survive the upgrade.
	tok, err := nu.AllocateToken(ctx5(t), "r", "o")
	require.NoError(t, err)
	require.Equal(t, uint64(2), tok)
	require.Equal(t, uint64(3), nu.Version())
	// A keyPath store works with CompareAndSwap.
	ok, err := nu.CompareAndSwap(ctx5(t), "", "more", "a", 1, js.ValueOf(map[string]any{"id": "a"}))
	require.True(t, ok)
	require.NoError(t, err)
}

func TestBlockedByForeignConnection(t *testing.T) {
	name := dbName(t)
	// An old build's connection that ignores versionchange.
	runJS(t, name, `globalThis.__stubborn = await new Promise((res, rej) => { const r = indexedDB.open(name, 1); r.onsuccess = () => res(r.result); r.onerror = () => rej(r.error); }); return 0;`)
	events := make(chan Event, 4)
	done := make(chan error, 1)
	go func() {
		d, err := Open(ctx5(t), name, WithSchema(Schema{Steps: []Step{{Version: 2}}}), WithEvents(func(e Event) { events <- e }))
		if err == nil {
			d.Close()
		}
		done <- err
	}()
	e := waitEvent(t, events)
	require.Equal(t, Blocked, e.Kind, "%+v", e)
	require.Equal(t, uint64(1), e.OldVersion, "%+v", e)
	require.Equal(t, uint64(2), e.NewVersion, "%+v", e)
	runJS(t, name, `globalThis.__stubborn.close(); return 0;`)
	require.NoError(t, <-done)
}

func TestOpenCancelledWhileBlocked(t *testing.T) {
	name := dbName(t)
	runJS(t, name, `globalThis.__stubborn2 = await new Promise((res, rej) => { const r = indexedDB.open(name, 1); r.onsuccess = () => res(r.result); r.onerror = () => rej(r.error); }); return 0;`)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := Open(ctx, name, WithSchema(Schema{Steps: []Step{{Version: 2}}}))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	runJS(t, name, `globalThis.__stubborn2.close(); return 0;`)
}

func TestUpgradeErrorFailsOpen(t *testing.T) {
	name := dbName(t)
	boom := errors.New("bad step")
	_, err := Open(ctx5(t), name, WithSchema(Schema{Steps: []Step{{Version: 1, Upgrade: func(tx *UpgradeTx) error {
		_ = tx.CreateStore("half", StoreOptions{})
		return boom
	}}}}))
	require.ErrorIs(t, err, boom)
	_, err = Open(ctx5(t), name, WithSchema(Schema{Steps: []Step{{Version: 1, Upgrade: func(tx *UpgradeTx) error {
		panic("x")
	}}}}))
	require.Error(t, err, "panic in upgrade must fail Open")
	_, err = Open(ctx5(t), name, WithSchema(Schema{Steps: []Step{{Version: 1, Upgrade: func(tx *UpgradeTx) error {
		return tx.CreateStore("tf_mine", StoreOptions{})
	}}}}))
	require.ErrorIs(t, err, ErrReservedStore)
	// The aborted upgrades left nothing behind: a good schema opens at 1.
	d := open(t, name, WithSchema(itemsSchema()))
	require.Equal(t, uint64(1), d.Version())
	_, err = Open(ctx5(t), name, WithSchema(Schema{Steps: []Step{{Version: 2}, {Version: 1}}}))
	require.ErrorIs(t, err, ErrInvalidSchema)
}

func TestOpeningOlderVersionIsVersionError(t *testing.T) {
	name := dbName(t)
	open(t, name, WithSchema(Schema{Steps: []Step{{Version: 2}}}))
	_, err := Open(ctx5(t), name)
	require.ErrorIs(t, err, jsglue.ErrVersion, "want VersionError")
}

// *DB is the token source of the Web Lock election.
var _ locks.Fencer = (*DB)(nil)

// A delete that lands after the connection opened and before Open returns
// must not hand out a dead connection, nor leave an empty database at the
// schema's version: Open reports ErrDeleted and the next Open starts clean.
func TestDeleteBetweenOpensLeavesNoHalfDatabase(t *testing.T) {
	name := dbName(t)
	testHookBetweenOpens = func(name string) {
		assert.NoError(t, Delete(context.Background(), name, nil))
	}
	_, err := Open(ctx5(t), name, WithSchema(itemsSchema()))
	testHookBetweenOpens = nil
	require.ErrorIs(t, err, ErrDeleted, "want ErrDeleted")
	d := open(t, name, WithSchema(itemsSchema()))
	res, err := d.Apply(ctx5(t), Op{Resource: "r", Token: 1, OperationID: "a"}, putItem("k", "v"))
	require.NoError(t, err)
	require.Equal(t, Accepted, res)
}
