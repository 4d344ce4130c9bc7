//go:build js && wasm

package idbstore

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// SetIDBTestHook lets the external tests inject a failure after a method
// issued its writes and before it commits.
func SetIDBTestHook(h func(op, stage string) error) { idbTestHook = h }

// SetClaimPage sets how many records s's Claim reads per step (tests: a
// small page makes every claim read the queue in several steps).
func SetClaimPage(s *Store, n int) { s.claimPage = n }

// openTestStore opens the IndexedDB store name for one test and closes it
// when the test ends.
func openTestStore(t *testing.T, name string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(context.Background(), name, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// A request that fails inside a transaction (a real ConstraintError from
// IndexedDB) aborts it: the earlier put of the same transaction is rolled
// back and the error keeps IndexedDB's name.
func TestIDBTxnRealAbortRollsBack(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, "tabfence-outbox:txn-abort")
	tx, err := s.begin("test", raw.ReadWrite, storeRecords)
	require.NoError(t, err)
	recs, _ := tx.store(storeRecords)
	r := queue.Record{ID: "first", IdempotencyKey: "k", UserID: "u", Status: queue.StatusPending, Seq: 1}
	_, err = tx.call(recs, "put", encodeRecord(&r, js.Undefined()))
	require.NoError(t, err)
	_, err = tx.call(recs, "add", encodeRecord(&r, js.Undefined()))
	require.NoError(t, err)
	last, _ := tx.call(recs, "count")
	werr := tx.wait(last)
	ferr := tx.finish()
	if werr == nil || ferr == nil {
		t.Fatalf("no error: %v %v", werr, ferr)
	}
	if !errors.Is(ferr, outbox.ErrTxAborted) || !errors.Is(ferr, jsglue.ErrConstraint) {
		t.Fatalf("abort error %v does not carry ErrTxAborted and ConstraintError", ferr)
	}
	if _, err := s.Get(ctx, "first"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("put of an aborted transaction survived: %v", err)
	}
}

// The abort cause of a transaction that ran out of quota maps to
// jsglue.ErrQuotaExceeded (the real quota path is tested with a Storage
// Bucket in TestIDBRealQuota).
func TestIDBAbortErrorMapsQuota(t *testing.T) {
	ex := js.Global().Get("DOMException").New("The quota has been exceeded.", "QuotaExceededError")
	err := wrapIDB("enqueue", abortError(jsglue.FromJS(ex)))
	if !errors.Is(err, jsglue.ErrQuotaExceeded) || !errors.Is(err, outbox.ErrTxAborted) {
		t.Fatalf("got %v", err)
	}
	var ie *Error
	if !errors.As(err, &ie) || ie.Op != "enqueue" {
		t.Fatalf("got %#v", err)
	}
}

// A fresh record's object (one JSON.parse plus the bytes and nested
// objects) decodes to the record, every field set, strings with quotes,
// control characters and non-ASCII included; a rewrite over it
// (the per-field path) decodes the same.
func TestEncodeFreshRecordRoundTrip(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	rec := queue.Record{
		ID: "id\"1", OperationKey: "key\\\x00\n", IdempotencyKey: "idem", EntityType: "note", EntityID: "é-1",
		OperationType: "put-note", Payload: []byte(`{"a":1}`), PayloadRef: "ref", PayloadHash: "abc",
		PayloadSchemaVersion: 2, Status: queue.StatusFailed, Attempts: 3, Sends: 4, MaxAttempts: 10,
		NextAttemptAt: at, LastError: &queue.ErrorInfo{Code: "http", Message: "x\ty", Status: 503, At: at},
		LeaseOwner: "o", LeaseToken: 9, LeaseExpiresAt: at, DependencyIDs: []string{"d1", "d\"2"}, Seq: 42,
		CreatedAt: at, UpdatedAt: at.Add(time.Millisecond), AckedAt: at.Add(2 * time.Millisecond),
		Response: &queue.StoredResponse{Status: 200, Body: []byte("ok"), Replayed: true},
		UserID:   "u", TenantID: "t", AuthGeneration: 5,
	}
	v := encodeRecord(&rec, js.Undefined())
	got, err := decodeRecord(v)
	require.NoError(t, err)
	if !reflect.DeepEqual(got, rec) {
		t.Fatalf("got  %+v\nwant %+v", got, rec)
	}
	if k := v.Get(fieldEntity); k.String() != rec.EntityKey() {
		t.Fatalf("entity key %q", k.String())
	}
	if k := v.Get(fieldOpKey); k.Length() != 2 || k.Index(0).String() != "u" || k.Index(1).String() != rec.OperationKey {
		t.Fatal("opKey index field")
	}
	again, err := decodeRecord(encodeRecord(&got, v))
	if err != nil || !reflect.DeepEqual(again, rec) {
		t.Fatalf("rewrite: %v %+v", err, again)
	}
}

// Outbox.Status on the IndexedDB store counts the unsettled records of a
// newer payload schema from its one status read (StatusSchema), exactly as
// the generic path (Status, then List of the newer records) does.
func TestIDBStatusCountsNewerSchema(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, "tabfence-outbox:status-schema")
	at := time.UnixMilli(1_700_000_000_000)
	for i, c := range []struct {
		ver int
		st  queue.Status
	}{{1, queue.StatusPending}, {3, queue.StatusPending}, {2, queue.StatusFailed}, {3, queue.StatusAcked}, {2, queue.StatusDeadLetter}, {0, queue.StatusPending}} {
		id := "r" + string(rune('a'+i))
		rec := queue.Record{ID: id, IdempotencyKey: "k" + id, EntityID: id, OperationType: "x", Payload: []byte("p"),
			PayloadSchemaVersion: c.ver, UserID: "u", Status: queue.StatusPending, CreatedAt: at, UpdatedAt: at}
		_, err := s.Enqueue(ctx, queue.EnqueueRequest{Record: rec, Policy: queue.Policy{Dedupe: queue.Append}})
		require.NoError(t, err)
		if c.st != queue.StatusPending {
			if _, err := s.Amend(ctx, id, func(r *queue.Record) error { r.Status = c.st; return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	ob, err := outbox.New(outbox.Config{Store: s, Transport: outbox.TransportFunc(func(context.Context, outbox.Request) (outbox.Response, error) { return outbox.Response{}, nil }),
		Policies: map[string]queue.Policy{"x": {Dedupe: queue.Append}}, SchemaVersion: 1})
	require.NoError(t, err)
	p, err := ob.Status(ctx)
	require.NoError(t, err)
	// Unsupported: the pending v3 record and the failed v2 one (newer);
	// not the settled ones, nor v0 (schema 1, the runtime's).
	all, err := ob.Unsupported(ctx)
	require.NoError(t, err)
	if p.Unsupported != 2 || len(all) != 2 {
		t.Fatalf("unsupported %d, generic path %d, want 2", p.Unsupported, len(all))
	}
	base, err := s.Status(ctx)
	require.NoError(t, err)
	base.Unsupported, base.OldestPendingAge = p.Unsupported, p.OldestPendingAge
	if !reflect.DeepEqual(base, p) {
		t.Fatalf("projection %+v, Status %+v", p, base)
	}
}

// A database of schema version 1 (a previous build's, with records in it)
// opens as version 2: the upgrade adds the schema index over the records
// already stored, so Status counts the newer-schema ones at once, and the
// records read and claim as before.
func TestIDBUpgradeFromVersion1(t *testing.T) {
	ctx := context.Background()
	name := "tabfence-outbox:upgrade-v1"
	_ = raw.DeleteDatabase(ctx, name, nil)
	db, err := raw.OpenDatabase(ctx, name, 1, raw.OpenOptions{
		Upgrade: func(db js.Value, tx *raw.Tx, oldV, _ uint64) error { return upgradeIDB(db, tx.JS(), oldV, 1) },
	})
	require.NoError(t, err)
	if db.Get("objectStoreNames").Length() != 4 || db.Call("transaction", storeRecords).Call("objectStore", storeRecords).Get("indexNames").Call("contains", indexSchema).Bool() {
		t.Fatal("version 1 schema not as it was")
	}
	at := time.UnixMilli(1_700_000_000_000)
	tx := db.Call("transaction", storeRecords, "readwrite")
	for i, ver := range []int{1, 3, 1, 2} {
		id := "r" + string(rune('a'+i))
		rec := queue.Record{ID: id, IdempotencyKey: "k" + id, EntityID: id, OperationType: "x", Payload: []byte("p"),
			PayloadSchemaVersion: ver, UserID: "u", Status: queue.StatusPending, CreatedAt: at.Add(time.Duration(i) * time.Second), UpdatedAt: at}
		tx.Call("objectStore", storeRecords).Call("put", encodeRecord(&rec, js.Undefined()))
	}
	if _, err := jsglue.Await(ctx, js.Global().Get("Promise").New(js.FuncOf(func(_ js.Value, a []js.Value) any {
		tx.Set("oncomplete", a[0])
		tx.Set("onabort", a[1])
		return nil
	}))); err != nil {
		t.Fatal(err)
	}
	db.Call("close")

	s := openTestStore(t, name)
	if v := s.db.Get("version").Int(); v != idbVersion {
		t.Fatalf("version %d after open, want %d", v, idbVersion)
	}
	p, err := s.StatusSchema(ctx, queue.SchemaGate{Version: 1})
	require.NoError(t, err)
	if p.Pending != 4 || p.Unsupported != 2 || !p.OldestPendingAt.Equal(at) {
		t.Fatalf("status after upgrade %+v", p)
	}
	l, err := s.UpdateLease(ctx, "flush", queue.AcquireLease("tab", at, time.Minute, true))
	require.NoError(t, err)
	got, err := s.Claim(ctx, queue.ClaimRequest{Lease: l, Now: at.Add(time.Hour), Limit: 10, LeaseTTL: time.Minute, UserID: "u", Schema: queue.SchemaGate{Version: 1}})
	if err != nil || len(got) != 2 || got[0].ID != "ra" || got[1].ID != "rc" {
		t.Fatalf("claim after upgrade: %+v %v", got, err)
	}
}

// After a schema bump the old schema's acked history stays in the store:
// the status read counts the unsettled records it leaves alone without
// reading that history (an odd acked record breaks no status read), and
// counts them right whichever set it reads.
func TestIDBStatusSkipsOldSchemaHistory(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, "tabfence-outbox:status-old-history")
	at := time.UnixMilli(1_700_000_000_000)
	add := func(id string, ver int, st queue.Status) queue.Record {
		t.Helper()
		rec := queue.Record{ID: id, IdempotencyKey: "k" + id, EntityID: id, OperationType: "x", Payload: []byte("p"),
			PayloadSchemaVersion: ver, UserID: "u", Status: queue.StatusPending, CreatedAt: at, UpdatedAt: at}
		_, err := s.Enqueue(ctx, queue.EnqueueRequest{Record: rec, Policy: queue.Policy{Dedupe: queue.Append}})
		require.NoError(t, err)
		if st != queue.StatusPending {
			var err error
			if rec, err = s.Amend(ctx, id, func(r *queue.Record) error { r.Status = st; return nil }); err != nil {
				t.Fatal(err)
			}
		}
		return rec
	}
	var acked queue.Record
	for i := 0; i < 6; i++ {
		acked = add("acked"+strconv.Itoa(i), 1, queue.StatusAcked)
	}
	add("old-pending", 1, queue.StatusPending) // no migration path: unsupported
	add("newer-failed", 3, queue.StatusFailed) // newer: unsupported
	add("old-dead", 1, queue.StatusDeadLetter) // settled: not counted
	add("current", 2, queue.StatusPending)     // sent as stored
	// An acked record of the old schema whose last error no reader takes.
	v := encodeRecord(&acked, js.Undefined())
	v.Set("lastError", 42)
	tx := s.db.Call("transaction", storeRecords, "readwrite")
	tx.Call("objectStore", storeRecords).Call("put", v)
	if _, err := jsglue.Await(ctx, js.Global().Get("Promise").New(js.FuncOf(func(_ js.Value, a []js.Value) any {
		tx.Set("oncomplete", a[0])
		tx.Set("onabort", a[1])
		return nil
	}))); err != nil {
		t.Fatal(err)
	}
	gate := queue.SchemaGate{Version: 2}
	check := func(pending int) {
		t.Helper()
		p, err := s.StatusSchema(ctx, gate)
		require.NoError(t, err, "status read")
		if p.Unsupported != 2 || p.Pending != pending || p.Acked != 6 || s.corrupt.Load() != 0 {
			t.Fatalf("status %+v, corrupt %d", p, s.corrupt.Load())
		}
	}
	check(2) // the unsettled records are the fewer: read by status
	for i := 0; i < 12; i++ {
		add("current"+strconv.Itoa(i), 2, queue.StatusPending)
	}
	check(14) // the other schemas' records are the fewer: read by schema
}
