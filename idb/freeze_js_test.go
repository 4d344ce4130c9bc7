//go:build js && wasm

package idb

import (
	"context"
	"errors"
	"strings"
	"syscall/js"
	"testing"
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
	if lifecycleJS.Type() != js.TypeObject {
		t.Fatal("the freeze tracker was not built")
	}
	d := open(t, dbName(t), WithSchema(itemsSchema()))
	ctx := ctx5(t)
	t.Cleanup(func() { lifecycle(t, "resume") })

	tx, err := Begin(d.raw, []string{"items"}, ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	tx.Store("items").Put(js.ValueOf("k"), js.ValueOf("open at the freeze"))
	lifecycle(t, "freeze")
	if err := tx.Await(ctx); !frozenAbort(err) {
		t.Fatalf("open transaction at the freeze: %v", err)
	}
	late, err := Begin(d.raw, []string{"items"}, ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	if err := late.Await(ctx); !frozenAbort(err) {
		t.Fatalf("transaction opened while frozen: %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := d.Apply(cctx, Op{Resource: "r", Token: 1, OperationID: "gone"}, putItem("k", "x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply with an ended context while frozen: %v", err)
	}
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
	if err := <-done; err != nil {
		t.Fatalf("Apply issued while frozen, after the resume: %v", err)
	}
	if got := item(t, d, "k"); got != "after the resume" {
		t.Fatalf("items/k = %s", got)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Call("close"); _ = DeleteDatabase(context.Background(), name, nil) })
	ctx := ctx5(t)
	t.Cleanup(func() { lifecycle(t, "resume") })

	begin := func(mode Mode, stores ...string) *Tx {
		tx, err := Begin(db, stores, mode)
		if err != nil {
			t.Fatal(err)
		}
		tx.Store(stores[0]).Get(js.ValueOf("x"))
		return tx
	}
	write, lease, read := begin(ReadWrite, "records"), begin(ReadWrite, "records", "leases"), begin(ReadOnly, "records")
	lifecycle(t, "freeze")
	if err := lease.Await(ctx); !frozenAbort(err) {
		t.Fatalf("lease transaction: %v", err)
	}
	if err := read.Await(ctx); !frozenAbort(err) {
		t.Fatalf("readonly transaction: %v", err)
	}
	if err := write.Await(ctx); err != nil {
		t.Fatalf("the app's write was not spared: %v", err)
	}
	lifecycle(t, "resume")

	write, lease = begin(ReadWrite, "records"), begin(ReadWrite, "leases")
	AbortOpen(db)
	if err := lease.Await(ctx); !errors.Is(err, ErrTxAborted) || frozenAbort(err) {
		t.Fatalf("AbortOpen, lease transaction: %v", err)
	}
	if err := write.Await(ctx); err != nil {
		t.Fatalf("AbortOpen, the app's write: %v", err)
	}
}
