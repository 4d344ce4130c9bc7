//go:build js && wasm

package idb_test

import (
	"context"
	"fmt"
	"syscall/js"

	"github.com/tabfence/tabfence/idb"
)

// A new leader allocates the resource's next token before it acts.
func ExampleDB_AllocateToken() {
	ctx := context.Background()
	db, err := idb.Open(ctx, "example-allocate")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	a, _ := db.AllocateToken(ctx, "outbox", "tab-a")
	b, _ := db.AllocateToken(ctx, "outbox", "tab-b")
	fmt.Println(a, b)
	// Output: 1 2
}

// The app declares its stores through ordered upgrade steps, and hears when
// another tab deletes or upgrades the database, so a leader can step down.
func ExampleOpen() {
	ctx := context.Background()
	schema := idb.Schema{Steps: []idb.Step{
		{Version: 1, Upgrade: func(tx *idb.UpgradeTx) error {
			return tx.CreateStore("settings", idb.StoreOptions{})
		}},
		{Version: 2, Upgrade: func(tx *idb.UpgradeTx) error {
			return tx.CreateStore("todos", idb.StoreOptions{KeyPath: "id"})
		}},
	}}
	events := make(chan idb.Event, 1)
	db, err := idb.Open(ctx, "example-open", idb.WithSchema(schema), idb.WithEvents(func(e idb.Event) { events <- e }))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("version", db.Version())

	// Signing out in another tab deletes the database:
	_ = idb.Delete(ctx, "example-open", nil)
	e := <-events
	<-db.Done()
	fmt.Println(e.Kind, db.Err())
	// Output:
	// version 2
	// deleted idb: database deleted by another tab
}

// A receiver applies a fenced operation together with its own writes.
func ExampleDB_Apply() {
	ctx := context.Background()
	db, err := idb.Open(ctx, "example-apply", idb.WithSchema(idb.Schema{Steps: []idb.Step{{Version: 1,
		Upgrade: func(tx *idb.UpgradeTx) error { return tx.CreateStore("settings", idb.StoreOptions{}) }}}}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	put := func(v string) func(*idb.WriteTx) error {
		// Only IndexedDB requests in here: no timers, locks, fetch or channels.
		return func(tx *idb.WriteTx) error {
			return tx.Put("settings", js.ValueOf("activePolicy"), js.ValueOf(v))
		}
	}
	r1, _ := db.Apply(ctx, idb.Op{Resource: "policy", Token: 2, OperationID: "op-2"}, put("v2"))
	r2, _ := db.Apply(ctx, idb.Op{Resource: "policy", Token: 2, OperationID: "op-2"}, put("v2 again"))
	r3, _ := db.Apply(ctx, idb.Op{Resource: "policy", Token: 1, OperationID: "op-1"}, put("v1"))
	v, _ := db.Get(ctx, "settings", js.ValueOf("activePolicy"))
	fmt.Println(r1, r2, r3, v.String())
	// Output: accepted duplicate stale v2
}

// CompareAndSwap writes a key only if the writer's token is still fresh.
func ExampleDB_CompareAndSwap() {
	ctx := context.Background()
	db, err := idb.Open(ctx, "example-cas", idb.WithSchema(idb.Schema{Steps: []idb.Step{{Version: 1,
		Upgrade: func(tx *idb.UpgradeTx) error { return tx.CreateStore("cache", idb.StoreOptions{}) }}}}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	newer, _ := db.CompareAndSwap(ctx, "catalog", "cache", "catalog", 11, js.ValueOf("v11"))
	older, _ := db.CompareAndSwap(ctx, "catalog", "cache", "catalog", 10, js.ValueOf("v10"))
	fmt.Println(newer, older)
	// Output: true false
}
