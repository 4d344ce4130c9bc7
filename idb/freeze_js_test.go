//go:build js && wasm

package idb

import (
	"context"
	"errors"
	"strings"
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/idb/raw"
)

// freezePage dispatches the page's freeze or resume event, as the browser
// does when it freezes a background tab (idb/raw's tests check the
// tracker's rules; this checks that idb's own calls live with them).
func freezePage(kind string) {
	js.Global().Get("document").Call("dispatchEvent", js.Global().Get("Event").New(kind))
}

// abortedByFreeze: err is the tracker's abort of a frozen page's transaction.
func abortedByFreeze(err error) bool {
	return errors.Is(err, raw.ErrTxAborted) && strings.Contains(err.Error(), "frozen")
}

// On freeze, the open transactions of a connection are aborted (nothing of
// them is written); while frozen, one opened anyway is aborted at once; idb's
// own calls wait for the resume instead, or for their context.
func TestFreezeAbortsOpenTransactions(t *testing.T) {
	d := open(t, dbName(t), WithSchema(itemsSchema()))
	require.True(t, d.conn.Call("hasOwnProperty", "transaction").Bool(), "the connection is not under the freeze tracker")
	ctx := ctx5(t)
	t.Cleanup(func() { freezePage("resume") })

	tx, err := raw.Begin(d.conn, []string{"items"}, raw.ReadWrite)
	require.NoError(t, err)
	tx.Store("items").Put(js.ValueOf("k"), js.ValueOf("open at the freeze"))
	freezePage("freeze")
	require.True(t, abortedByFreeze(tx.Await(ctx)), "open transaction at the freeze")
	late, err := raw.Begin(d.conn, []string{"items"}, raw.ReadOnly)
	require.NoError(t, err)
	require.True(t, abortedByFreeze(late.Await(ctx)), "transaction opened while frozen")

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
	freezePage("resume")
	require.NoError(t, <-done, "Apply issued while frozen, after the resume")
	require.Equal(t, "after the resume", item(t, d, "k"), "items/k")
}
