//go:build js && wasm

package raw

import (
	"context"
	"errors"
	"strconv"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue"
)

var dbSeq int

// dbName is a database name no other test uses.
func dbName(t *testing.T) string {
	dbSeq++
	return "test-raw-" + t.Name() + "-" + strconv.Itoa(dbSeq)
}

// ctx5 ends when the test does, or after ten seconds.
func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rawDB opens a database with an "items" store (out-of-line keys) and a
// "people" store (key path id, index byName on name) through the raw layer.
func rawDB(t *testing.T) js.Value {
	t.Helper()
	name := dbName(t)
	db, err := OpenDatabase(ctx5(t), name, 1, OpenOptions{Upgrade: func(db js.Value, tx *Tx, oldV, newV uint64) error {
		if oldV != 0 || newV != 1 {
			return errors.New("versions")
		}
		db.Call("createObjectStore", "items")
		p := db.Call("createObjectStore", "people", map[string]any{"keyPath": "id"})
		p.Call("createIndex", "byName", "name")
		return nil
	}})
	require.NoError(t, err)
	t.Cleanup(func() {
		db.Call("close")
		_ = DeleteDatabase(context.Background(), name, nil)
	})
	return db
}

func beginT(t *testing.T, db js.Value, mode Mode, stores ...string) *Tx {
	t.Helper()
	tx, err := Begin(db, stores, mode)
	require.NoError(t, err)
	return tx
}

func num(i int) js.Value { return js.ValueOf(i) }

func str(s string) js.Value { return js.ValueOf(s) }

// fill writes keys 0..n-1 (numbers) with values "v<i>" into items.
func fill(t *testing.T, db js.Value, n int) {
	t.Helper()
	tx := beginT(t, db, ReadWrite, "items")
	st := tx.Store("items")
	for i := 0; i < n; i++ {
		st.Put(num(i), str("v"+strconv.Itoa(i)))
	}
	require.NoError(t, tx.Await(ctx5(t)))
}

func TestRawRequests(t *testing.T) {
	db := rawDB(t)
	ctx := ctx5(t)
	fill(t, db, 5)
	tx := beginT(t, db, ReadWrite, "items", "people")
	st := tx.Store("items")
	v, err := st.Get(num(2)).Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, "v2", v.String(), v)
	v, err = st.Get(num(99)).Await(ctx)
	require.NoError(t, err, v)
	require.True(t, v.IsUndefined(), v)
	v, err = st.Count(js.Undefined()).Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, 5, v.Int(), v)
	rng, err := Bound(num(1), num(3), false, true)
	require.NoError(t, err)
	v, err = st.GetAll(rng, 0).Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, 2, v.Length(), v)
	require.Equal(t, "v2", v.Index(1).String(), v)
	v, err = st.GetAllKeys(js.Undefined(), 3).Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, 3, v.Length(), v)
	require.Equal(t, 2, v.Index(2).Int(), v)
	v, err = st.GetKey(rng).Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, 1, v.Int(), v)
	lo, _ := LowerBound(num(3), true)
	v, err = st.Count(lo).Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, 1, v.Int(), v)
	up, _ := UpperBound(num(1), false)
	v, err = st.Delete(up).Await(ctx)
	require.NoError(t, err, v)
	require.True(t, v.IsUndefined(), v)
	only, _ := Only(num(4))
	v, err = st.Count(only).Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, 1, v.Int(), v)
	people := tx.Store("people")
	require.Equal(t, "id", people.KeyPath().String())
	people.Put(js.Undefined(), js.ValueOf(map[string]any{"id": "a", "name": "Ada"}))
	people.Add(js.Undefined(), js.ValueOf(map[string]any{"id": "b", "name": "Bob"}))
	ix := people.Index("byName")
	v, err = ix.Get(str("Bob")).Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, "b", v.Get("id").String(), v)
	v, err = ix.GetKey(str("Ada")).Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, "a", v.String(), v)
	v, err = ix.GetAll(js.Undefined(), 0).Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, 2, v.Length(), v)
	v, err = ix.GetAllKeys(js.Undefined(), 0).Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, "a", v.Index(0).String(), v)
	v, err = ix.Count(js.Undefined()).Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, 2, v.Int(), v)
	require.ErrorIs(t, tx.Store("nope").Err(), jsglue.ErrNotFound)
	require.ErrorIs(t, people.Index("nope").Err(), jsglue.ErrNotFound)
	require.NoError(t, tx.Commit())
	require.NoError(t, tx.Await(ctx))
	// Clear in its own transaction, then nothing is left.
	tx = beginT(t, db, ReadWrite, "items")
	tx.Store("items").Clear()
	c := tx.Store("items").Count(js.Undefined())
	require.NoError(t, tx.Await(ctx))
	v, err = c.Result()
	require.NoError(t, err, v)
	require.Equal(t, 0, v.Int(), v)
	settled(t)
}

// Issue several requests, await only the last: the earlier ones are read
// with Result (or Await, which finds them settled without waiting).
func TestRawResultOfEarlierRequests(t *testing.T) {
	db := rawDB(t)
	ctx := ctx5(t)
	fill(t, db, 3)
	tx := beginT(t, db, ReadOnly, "items")
	st := tx.Store("items")
	a, b, c := st.Get(num(0)), st.Get(num(1)), st.Get(num(2))
	_, err := a.Result()
	require.ErrorIs(t, err, ErrPending)
	v, err := c.Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, "v2", v.String(), v)
	v, err = a.Result()
	require.NoError(t, err, v)
	require.Equal(t, "v0", v.String(), v)
	v, err = b.Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, "v1", v.String(), v)
	require.NoError(t, tx.Await(ctx))
}

func TestRawAsyncErrorAbortsWholeTx(t *testing.T) {
	db := rawDB(t)
	ctx := ctx5(t)
	fill(t, db, 1)
	// Fire and check: nothing awaited but the transaction.
	tx := beginT(t, db, ReadWrite, "items")
	st := tx.Store("items")
	st.Put(str("a"), num(1))
	st.Add(num(0), str("dup")) // key 0 exists: ConstraintError
	st.Put(str("b"), num(2))
	err := tx.Await(ctx)
	var ae *AbortedError
	require.ErrorIs(t, err, jsglue.ErrConstraint, "want an aborted ConstraintError")
	require.ErrorIs(t, err, ErrTxAborted, "want an aborted ConstraintError")
	require.ErrorAs(t, err, &ae, "want an aborted ConstraintError")
	// Awaited, the failing request reports its own error.
	tx = beginT(t, db, ReadWrite, "items")
	st = tx.Store("items")
	st.Put(str("c"), num(3))
	_, err = st.Add(num(0), str("dup")).Await(ctx)
	require.ErrorIs(t, err, jsglue.ErrConstraint)
	require.ErrorIs(t, tx.Await(ctx), jsglue.ErrConstraint)
	checkAbsent(t, db, "a", "b", "c")
	require.Equal(t, "v0", getItem(t, db, num(0)).String())
}

func TestRawSyncErrorAbortsWholeTx(t *testing.T) {
	db := rawDB(t)
	ctx := ctx5(t)
	tx := beginT(t, db, ReadWrite, "items")
	st := tx.Store("items")
	st.Put(str("a"), num(1))
	r := st.Put(js.Global().Get("Object").New(), num(1)) // not a valid key
	require.ErrorIs(t, r.Err(), jsglue.ErrData)
	_, err := r.Await(ctx)
	require.ErrorIs(t, err, jsglue.ErrData)
	err = tx.Await(ctx)
	require.ErrorIs(t, err, jsglue.ErrData)
	require.ErrorIs(t, err, ErrTxAborted)
	// A store outside the scope fails the same way.
	tx = beginT(t, db, ReadWrite, "items")
	tx.Store("items").Put(str("b"), num(1))
	require.ErrorIs(t, tx.Store("people").Put(js.Undefined(), js.ValueOf(map[string]any{"id": "x"})).Err(), jsglue.ErrNotFound)
	require.ErrorIs(t, tx.Await(ctx), jsglue.ErrNotFound)
	checkAbsent(t, db, "a", "b")
}

func TestRawAbortCauses(t *testing.T) {
	db := rawDB(t)
	ctx := ctx5(t)
	tx := beginT(t, db, ReadWrite, "items")
	tx.Store("items").Put(str("a"), num(1))
	require.NoError(t, tx.Abort())
	require.NoError(t, tx.Abort(), "a second Abort must be a no-op")
	err := tx.Await(ctx)
	require.ErrorIs(t, err, ErrTxAborted)
	require.ErrorIs(t, err, jsglue.ErrAbort)
	// The reason given to the abort is the cause, typed.
	tx = beginT(t, db, ReadWrite, "items")
	tx.Store("items").Put(str("a"), num(1))
	_ = tx.AbortWith(jsglue.NewJSError("QuotaExceededError", "full"))
	require.ErrorIs(t, tx.Await(ctx), jsglue.ErrQuotaExceeded)
	// A committed transaction cannot be aborted.
	tx = beginT(t, db, ReadWrite, "items")
	tx.Store("items").Put(str("c"), num(1))
	require.NoError(t, tx.Await(ctx))
	require.ErrorIs(t, tx.Abort(), jsglue.ErrInvalidState)
	checkAbsent(t, db, "a")
}

// The browser's own abort cause keeps its DOMException name: a record over
// the store's quota is hard to provoke, so a ConstraintError from a unique
// index stands in for any name IndexedDB reports in tx.error.
func TestRawIndexConstraintAbortCause(t *testing.T) {
	name := dbName(t)
	db, err := OpenDatabase(ctx5(t), name, 1, OpenOptions{Upgrade: func(db js.Value, tx *Tx, _, _ uint64) error {
		st := db.Call("createObjectStore", "u", map[string]any{"keyPath": "id"})
		st.Call("createIndex", "byEmail", "email", map[string]any{"unique": true})
		return nil
	}})
	require.NoError(t, err)
	defer db.Call("close")
	tx := beginT(t, db, ReadWrite, "u")
	tx.Store("u").Put(js.Undefined(), js.ValueOf(map[string]any{"id": 1, "email": "x"}))
	tx.Store("u").Put(js.Undefined(), js.ValueOf(map[string]any{"id": 2, "email": "x"}))
	require.ErrorIs(t, tx.Await(ctx5(t)), jsglue.ErrConstraint)
}

func TestRawCancelledContext(t *testing.T) {
	db := rawDB(t)
	fill(t, db, 1)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for i := 0; i < 40; i++ {
		tx := beginT(t, db, ReadWrite, "items")
		st := tx.Store("items")
		r := st.Get(num(0))
		v, err := r.Await(cancelled)
		require.ErrorIs(t, err, context.Canceled, "request: %v", v)
		require.True(t, v.IsUndefined(), "request: %v", v)
		st.Put(str("w"+strconv.Itoa(i)), num(i))
		done := make(chan error, 1)
		go func() { done <- tx.Await(cancelled) }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.Canceled, "tx")
		case <-time.After(2 * time.Second):
			t.Fatal("Tx.Await with a cancelled ctx hung")
		}
		// The abort went through: the request is settled, the tx done.
		_, err = r.Await(ctx5(t))
		require.ErrorIs(t, err, jsglue.ErrAbort, "request of the aborted tx")
		<-tx.Done()
	}
	checkAbsent(t, db, "w0", "w39")
}

// A transaction kept waiting behind another returns promptly when its ctx
// ends, and is aborted: its write never lands.
func TestRawCancelWhileWaiting(t *testing.T) {
	db := rawDB(t)
	hold := js.Global().Get("Function").New("db", `
		const tx = db.transaction("items", "readwrite"); const st = tx.objectStore("items");
		const end = performance.now() + 400;
		const spin = () => { if (performance.now() < end) st.get("x").onsuccess = spin; };
		spin();
		return new Promise(r => { tx.oncomplete = r; });`).Invoke(db)
	tx := beginT(t, db, ReadWrite, "items")
	st := tx.Store("items")
	st.Put(str("late"), num(1))
	r := st.Get(str("late"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := r.Await(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, tx.Await(ctx), context.DeadlineExceeded)
	require.LessOrEqual(t, time.Since(start), 300*time.Millisecond, "cancellation took")
	_, err = jsglue.Await(ctx5(t), hold)
	require.NoError(t, err)
	checkAbsent(t, db, "late")
}

func TestRawCursor(t *testing.T) {
	db := rawDB(t)
	ctx := ctx5(t)
	fill(t, db, 10)
	tx := beginT(t, db, ReadWrite, "items", "people")
	st := tx.Store("items")
	var got []int
	rng, _ := Bound(num(3), num(7), false, false)
	r := st.OpenCursor(rng, Next, func(k, v js.Value) bool {
		assert.Equal(t, "v"+strconv.Itoa(k.Int()), v.String(), "value %v at %v", v, k)
		got = append(got, k.Int())
		return true
	})
	if _, err := r.Await(ctx); err != nil || len(got) != 5 || got[0] != 3 || got[4] != 7 {
		t.Fatal(got, err)
	}
	// Backwards, stopping early.
	got = got[:0]
	if _, err := st.OpenCursor(js.Undefined(), Prev, func(k, _ js.Value) bool {
		got = append(got, k.Int())
		return len(got) < 3
	}).Await(ctx); err != nil || len(got) != 3 || got[0] != 9 || got[2] != 7 {
		t.Fatal(got, err)
	}
	// Delete and update through the cursor, issuing requests from inside it.
	_, err := st.Iterate(js.Undefined(), Next, func(c Cursor) bool {
		if c.Key().Int()%2 == 0 {
			c.Delete()
		} else {
			c.Update(str("odd"))
		}
		return true
	}).Await(ctx)
	require.NoError(t, err)
	v, _ := st.Count(js.Undefined()).Await(ctx)
	require.Equal(t, 5, v.Int(), v)
	v, _ = st.Get(num(3)).Await(ctx)
	require.Equal(t, "odd", v.String(), v)
	// Key cursor on an index.
	people := tx.Store("people")
	for _, n := range []string{"c", "a", "b"} {
		people.Put(js.Undefined(), js.ValueOf(map[string]any{"id": "id-" + n, "name": n}))
	}
	var names, ids []string
	if _, err := people.Index("byName").IterateKeys(js.Undefined(), Next, func(c Cursor) bool {
		names = append(names, c.Key().String())
		ids = append(ids, c.PrimaryKey().String())
		return true
	}).Await(ctx); err != nil || len(names) != 3 || names[0] != "a" || ids[2] != "id-c" {
		t.Fatal(names, ids, err)
	}
	// An empty range calls nothing.
	empty, _ := Bound(num(100), num(200), false, false)
	_, err = st.OpenCursor(empty, Next, func(js.Value, js.Value) bool { t.Error("called"); return true }).Await(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.Await(ctx))
	// A panic in the function aborts the transaction.
	tx = beginT(t, db, ReadWrite, "items")
	st = tx.Store("items")
	st.Put(str("x"), num(1))
	_, err = st.Iterate(js.Undefined(), Next, func(Cursor) bool { panic("boom") }).Await(ctx)
	require.ErrorIs(t, err, errCursorPanic)
	err = tx.Await(ctx)
	require.ErrorIs(t, err, errCursorPanic)
	require.ErrorIs(t, err, ErrTxAborted)
	settled(t)
	checkAbsent(t, db, "x")
}

func TestRawManyRequestsLeakNothing(t *testing.T) {
	db := rawDB(t)
	base := jsglue.LiveCallbacks()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	total := 0
	for round := 0; round < 10; round++ {
		// A hang guard per round of 1,000 requests, not one for all ten:
		// on a loaded machine the whole run can take longer than one guard.
		ctx := ctx5(t)
		tx := beginT(t, db, ReadWrite, "items")
		st := tx.Store("items")
		for i := 0; i < 500; i++ {
			st.Put(num(i), num(round))
			total++
			r := st.Get(num(i))
			total++
			switch i % 3 {
			case 0:
				v, err := r.Await(ctx)
				require.NoError(t, err, v)
				require.Equal(t, round, v.Int(), v)
			case 1:
				_, _ = r.Await(cancelled) // abandoned: its event still cleans up
			}
		}
		require.NoError(t, tx.Await(ctx))
	}
	require.Equal(t, 10000, total)
	require.Equal(t, base, jsglue.LiveCallbacks(), "live callbacks")
	settled(t)
}

func TestRawDurabilityAndCommit(t *testing.T) {
	db := rawDB(t)
	tx, err := Begin(db, []string{"items"}, ReadWrite, WithTxDurability(DurabilityStrict))
	require.NoError(t, err)
	require.Equal(t, "strict", tx.JS().Get("durability").String())
	tx.Store("items").Put(str("k"), num(1))
	require.NoError(t, tx.Commit())
	// Nothing may be issued after commit.
	if err := tx.Store("items").Put(str("k2"), num(1)).Err(); !errors.Is(err, jsglue.ErrTransactionInactive) && !errors.Is(err, jsglue.ErrInvalidState) {
		t.Fatal(err)
	}
	// The committed write stands, and Await reports the refused request.
	require.Error(t, tx.Await(ctx5(t)), "the refused request must be reported")
	require.Equal(t, 1, getItem(t, db, str("k")).Int())
	_, err = Begin(db, nil, ReadOnly)
	require.Error(t, err, "an empty scope must fail")
}

// A data migration in an upgrade: Iterate runs inside the versionchange
// transaction without awaiting anything.
func TestRawOpenUpgradeMigration(t *testing.T) {
	name := dbName(t)
	ctx := ctx5(t)
	db, err := OpenDatabase(ctx, name, 1, OpenOptions{Upgrade: func(db js.Value, tx *Tx, _, _ uint64) error {
		db.Call("createObjectStore", "s")
		for i := 0; i < 5; i++ {
			tx.Store("s").Put(num(i), num(i))
		}
		return nil
	}})
	require.NoError(t, err)
	db.Call("close")
	blocked := make(chan uint64, 1)
	var opened js.Value
	db, err = OpenDatabase(ctx, name, 2, OpenOptions{
		Upgrade: func(db js.Value, tx *Tx, oldV, newV uint64) error {
			if oldV != 1 || newV != 2 {
				return errors.New("versions")
			}
			tx.Store("s").Iterate(js.Undefined(), Next, func(c Cursor) bool {
				c.Update(js.ValueOf(c.Value().Int() * 10))
				return true
			})
			return nil
		},
		Blocked: func(o, n uint64) { blocked <- o },
		Opened:  func(db js.Value) { opened = db },
	})
	require.NoError(t, err)
	defer db.Call("close")
	require.True(t, opened.Equal(db), "Opened not called with the connection, or blocked")
	require.Empty(t, blocked, "Opened not called with the connection, or blocked")
	tx := beginT(t, db, ReadOnly, "s")
	v, err := tx.Store("s").Get(num(4)).Await(ctx)
	require.NoError(t, err, v)
	require.Equal(t, 40, v.Int(), v)
	// A failing upgrade leaves the database as it was.
	db.Call("close")
	boom := errors.New("boom")
	_, err = OpenDatabase(ctx, name, 3, OpenOptions{Upgrade: func(db js.Value, tx *Tx, _, _ uint64) error {
		db.Call("createObjectStore", "t")
		return boom
	}})
	require.ErrorIs(t, err, boom)
	db, err = OpenDatabase(ctx, name, 0, OpenOptions{})
	require.NoError(t, err)
	require.Equal(t, 2, db.Get("version").Int())
	require.False(t, db.Get("objectStoreNames").Call("contains", "t").Bool())
	db.Call("close")
	require.NoError(t, DeleteDatabase(ctx, name, nil))
}

func getItem(t *testing.T, db js.Value, key js.Value) js.Value {
	t.Helper()
	tx := beginT(t, db, ReadOnly, "items")
	v, err := tx.Store("items").Get(key).Await(ctx5(t))
	require.NoError(t, err)
	return v
}

func checkAbsent(t *testing.T, db js.Value, keys ...string) {
	t.Helper()
	for _, k := range keys {
		require.True(t, getItem(t, db, str(k)).IsUndefined(), "%s was written", k)
	}
}

// settled waits until no transaction or awaited request is registered
// (readonly transactions nobody awaits finish a moment later).
func settled(t *testing.T) {
	t.Helper()
	for i := 0; ; i++ {
		n1, n2 := pending()
		if n1 == 0 && n2 == 0 {
			return
		}
		require.NotEqual(t, 400, i, "left registered: %d transactions, %d requests", n1, n2)
		time.Sleep(5 * time.Millisecond)
	}
}
