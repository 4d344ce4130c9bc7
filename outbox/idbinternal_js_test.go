//go:build js && wasm

package outbox

import (
	"context"
	"errors"
	"syscall/js"
	"testing"

	"github.com/tabfence/tabfence/jsglue"
)

// SetIDBTestHook lets the external tests inject a failure after a method
// issued its writes and before it commits.
func SetIDBTestHook(h func(op, stage string) error) { idbTestHook = h }

// A request that fails inside a transaction (a real ConstraintError from
// IndexedDB) aborts it: the earlier put of the same transaction is rolled
// back and the error keeps IndexedDB's name.
func TestIDBTxnRealAbortRollsBack(t *testing.T) {
	ctx := context.Background()
	s, err := OpenIDBStore(ctx, "tabfence-outbox:txn-abort")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tx, err := s.begin("test", "readwrite", storeRecords)
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := tx.store(storeRecords)
	r := Record{ID: "first", IdempotencyKey: "k", UserID: "u", Status: StatusPending, Seq: 1}
	if _, err := tx.call(recs, "put", encodeRecord(&r, js.Undefined())); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.call(recs, "add", encodeRecord(&r, js.Undefined())); err != nil {
		t.Fatal(err)
	}
	last, _ := tx.call(recs, "count")
	werr := tx.wait(last)
	ferr := tx.finish()
	if werr == nil || ferr == nil {
		t.Fatalf("no error: %v %v", werr, ferr)
	}
	if !errors.Is(ferr, ErrTxAborted) || !errors.Is(ferr, jsglue.ErrConstraint) {
		t.Fatalf("abort error %v does not carry ErrTxAborted and ConstraintError", ferr)
	}
	if _, err := s.Get(ctx, "first"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("put of an aborted transaction survived: %v", err)
	}
}

// The abort cause of a transaction that ran out of quota maps to
// jsglue.ErrQuotaExceeded (the real quota path is tested with a Storage
// Bucket in TestIDBRealQuota).
func TestIDBAbortErrorMapsQuota(t *testing.T) {
	ex := js.Global().Get("DOMException").New("The quota has been exceeded.", "QuotaExceededError")
	err := wrapIDB("enqueue", abortError(jsglue.FromJS(ex)))
	if !errors.Is(err, jsglue.ErrQuotaExceeded) || !errors.Is(err, ErrTxAborted) {
		t.Fatalf("got %v", err)
	}
	var ie *IDBError
	if !errors.As(err, &ie) || ie.Op != "enqueue" {
		t.Fatalf("got %#v", err)
	}
}
