//go:build js && wasm

package raw

import (
	"context"
	"errors"
	"strings"
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/require"
)

// lifecycle dispatches the page's freeze or resume event, as the browser
// does when it freezes a background tab (the e2e tests freeze real tabs
// with CDP; this checks the tracker's rules one by one).
func lifecycle(t *testing.T, kind string) {
	t.Helper()
	js.Global().Get("document").Call("dispatchEvent", js.Global().Get("Event").New(kind))
}

func frozenAbort(err error) bool {
	return errors.Is(err, ErrTxAborted) && strings.Contains(err.Error(), "frozen")
}

// On freeze, the open transactions of a connection are aborted (nothing of
// them is written); while frozen, one opened anyway is aborted at once; idb's
// own calls wait for the resume instead, or for their context.
func TestFreezeAbortsOpenTransactions(t *testing.T) {
	require.Equal(t, js.TypeObject, lifecycleJS.Type(), "the freeze tracker was not built")
	d := open(t, dbName(t), WithSchema(itemsSchema()))
	ctx := ctx5(t)
	t.Cleanup(func() { lifecycle(t, "resume") })

	tx, err := Begin(d.raw, []string{"items"}, ReadWrite)
	require.NoError(t, err)
	tx.Store("items").Put(js.ValueOf("k"), js.ValueOf("open at the freeze"))
	lifecycle(t, "freeze")
	require.True(t, frozenAbort(tx.Await(ctx)), "open transaction at the freeze")
	late, err := Begin(d.raw, []string{"items"}, ReadOnly)
	require.NoError(t, err)
	require.True(t, frozenAbort(late.Await(ctx)), "transaction opened while frozen")

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = d.Apply(cctx, Op{Resource: "r", Token: 1, OperationID: "gone"}, putItem("k", "x"))
	require.ErrorIs(t, err, context.Canceled, "Apply with an ended context while frozen")
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		res, err := d.Apply(ctx, Op{Resource: "r", Token: 1, OperationID: "after"}, putItem("k", "after the resume"))
		if err == nil && res != Accepted {
			err = errors.New(res.String())
		}
		done <- err
	}()
	<-started
	lifecycle(t, "resume")
	require.NoError(t, <-done, "Apply issued while frozen, after the resume")
	require.Equal(t, "after the resume", item(t, d, "k"), "items/k")
}

// A connection that spares the app's writes keeps its readwrite
// transactions outside the listed stores through a freeze and aborts the
// rest; AbortOpen aborts the same ones without a freeze.
func TestFreezeSparesAppWrites(t *testing.T) {
	name := dbName(t)
	db, err := OpenDatabase(ctx5(t), name, 1, OpenOptions{
		Upgrade: func(db js.Value, _ *Tx, _, _ uint64) error {
			db.Call("createObjectStore", "records")
			db.Call("createObjectStore", "leases")
			return nil
		},
		SpareWritesWithout: []string{"leases"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { db.Call("close"); _ = DeleteDatabase(context.Background(), name, nil) })
	ctx := ctx5(t)
	t.Cleanup(func() { lifecycle(t, "resume") })

	begin := func(mode Mode, stores ...string) *Tx {
		tx, err := Begin(db, stores, mode)
		require.NoError(t, err)
		tx.Store(stores[0]).Get(js.ValueOf("x"))
		return tx
	}
	write, lease, read := begin(ReadWrite, "records"), begin(ReadWrite, "records", "leases"), begin(ReadOnly, "records")
	lifecycle(t, "freeze")
	require.True(t, frozenAbort(lease.Await(ctx)), "lease transaction")
	require.True(t, frozenAbort(read.Await(ctx)), "readonly transaction")
	require.NoError(t, write.Await(ctx), "the app's write was not spared")
	lifecycle(t, "resume")

	write, lease = begin(ReadWrite, "records"), begin(ReadWrite, "leases")
	AbortOpen(db)
	err = lease.Await(ctx)
	require.ErrorIs(t, err, ErrTxAborted, "AbortOpen, lease transaction")
	require.False(t, frozenAbort(err), "AbortOpen, lease transaction")
	require.NoError(t, write.Await(ctx), "AbortOpen, the app's write")
}
