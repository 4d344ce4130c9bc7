package idb_test

import (
	"fmt"

	"github.com/tabfence/tabfence/idb"
)

// Decide is the fence's pure decision: what Apply does inside its
// transaction. allocated is the resource's last allocated token (tf_epochs):
// a thief allocated 43 and the old leader's next 42 is stale, although the
// thief has written nothing yet.
func ExampleDecide() {
	rec := idb.FenceRecord{Resource: "r"}
	for _, op := range []idb.Op{
		{Resource: "r", Token: 42, OperationID: "a", Sequence: 1},
		{Resource: "r", Token: 41, OperationID: "b", Sequence: 1}, // old leader
		{Resource: "r", Token: 42, OperationID: "a", Sequence: 1}, // retry
		{Resource: "r", Token: 42, OperationID: "c", Sequence: 2}, // same leader, next op
		{Resource: "r", Token: 42, OperationID: "e", Sequence: 3}, // after the steal
		{Resource: "r", Token: 43, OperationID: "d", Sequence: 1}, // new leader
	} {
		allocated := uint64(42)
		if op.OperationID >= "d" {
			allocated = 43 // a steal allocated 43
		}
		var res idb.Result
		res, next := idb.Decide(rec, allocated, op, 0)
		if res == idb.Accepted {
			rec = next
		}
		fmt.Println(op.Token, op.OperationID, res)
	}
	fmt.Println("highest", rec.Highest)
	// Output:
	// 42 a accepted
	// 41 b stale
	// 42 a duplicate
	// 42 c accepted
	// 42 e stale
	// 43 d accepted
	// highest 43
}
