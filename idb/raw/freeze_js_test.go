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

// A connection that spares the app's writes keeps its readwrite
// transactions outside the listed stores through a freeze and aborts the
// rest; AbortOpen aborts the same ones without a freeze.
func TestFreezeSparesAppWrites(t *testing.T) {
	require.Equal(t, js.TypeObject, lifecycleJS.Type(), "the freeze tracker was not built")
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
