//go:build js && wasm

package idbstore_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/idbstore"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/outbox/storetest"
)

var dbSeq atomic.Int64

// dbName is the database of queue q at protocol 1.
func dbName(q string) string {
	n, _ := queue.Names(q, 1)
	return n.Database
}

// openFresh opens a store on a new database, deleted again after the test.
func openFresh(t *testing.T, opts ...idbstore.Option) *idbstore.Store {
	t.Helper()
	name := dbName("test-" + strconv.FormatInt(dbSeq.Add(1), 10))
	s, err := idbstore.Open(context.Background(), name, opts...)
	require.NoError(t, err, "open %s", name)
	t.Cleanup(func() {
		s.Close()
		_, _ = jsglue.Await(context.Background(), jsEval(`(n) => new Promise(r => { const q = indexedDB.deleteDatabase(n); q.onsuccess = q.onerror = q.onblocked = () => r(); })`).Invoke(name))
	})
	return s
}

func jsEval(src string) js.Value { return js.Global().Call("eval", src) }

// rawPut writes value into store of database name with plain JavaScript,
// as foreign code (or another build) would.
func rawPut(t *testing.T, name, store string, value js.Value) {
	t.Helper()
	_, err := jsglue.Await(context.Background(), jsEval(`(n, s, v) => new Promise((res, rej) => {
		const q = indexedDB.open(n);
		q.onerror = () => rej(q.error);
		q.onsuccess = () => {
			const db = q.result;
			const tx = db.transaction(s, "readwrite");
			tx.objectStore(s).put(v);
			tx.oncomplete = () => { db.close(); res(); };
			tx.onabort = () => { db.close(); rej(tx.error); };
		};
	})`).Invoke(name, store, value))
	require.NoError(t, err, "raw put")
}

func rawGet(t *testing.T, name, store, key string) js.Value {
	t.Helper()
	v, err := jsglue.Await(context.Background(), jsEval(`(n, s, k) => new Promise((res, rej) => {
		const q = indexedDB.open(n);
		q.onerror = () => rej(q.error);
		q.onsuccess = () => {
			const db = q.result;
			const st = db.transaction(s).objectStore(s);
			const r = s === "records" ? st.index("id").get(k) : st.get(k);
			r.onsuccess = () => { db.close(); res(r.result); };
			r.onerror = () => { db.close(); rej(r.error); };
		};
	})`).Invoke(name, store, key))
	require.NoError(t, err, "raw get")
	return v
}

func TestIDBStoreConformance(t *testing.T) { idbConformance(t, 0) }

// The suite again with Claim reading one record per step: every claim
// pages through the queue, and must still decide as PlanClaim over all.
func TestIDBStoreConformanceClaimPaged(t *testing.T) { idbConformance(t, 1) }

func idbConformance(t *testing.T, claimPage int) {
	storetest.RunWith(t, func(t *testing.T) outbox.Store {
		s := openFresh(t)
		idbstore.SetClaimPage(s, claimPage)
		return s
	}, storetest.Options{
		ErrCorrupt: outbox.ErrCorruptRecord,
		InjectCorrupt: func(t *testing.T, s outbox.Store, id string) {
			// Indexed like a live record of alice, but the status is a number.
			rawPut(t, s.(*idbstore.Store).Name(), "records", jsEval(`(id) => ({id, v: 1, status: 7, seq: 1.5, userId: "alice", _live: 1, _entity: "x"})`).Invoke(id))
		},
	})
}

func enq(t *testing.T, s outbox.Store, r queue.Record, inline int) queue.EnqueueResult {
	t.Helper()
	res, err := s.Enqueue(context.Background(), queue.EnqueueRequest{Record: r, Policy: queue.Policy{Dedupe: queue.Append}, InlineLimit: inline})
	require.NoError(t, err, "enqueue")
	return res
}

func TestIDBDurableAcrossReopen(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t)
	big := bytes.Repeat([]byte("b"), 1000)
	a := enq(t, s, storetest.NewRecord("a", "alice", "comment", "", "n1", big), 100)
	lease, err := s.UpdateLease(ctx, "flush", queue.AcquireLease("tab1", storetest.T0, time.Minute, true))
	require.NoError(t, err)
	if _, err := s.UpdateMeta(ctx, func(m *outbox.Meta) error { m.AuthPaused = []string{"bob"}; return nil }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Get(ctx, "a"); !errors.Is(err, outbox.ErrStoreClosed) {
		t.Fatalf("closed store: %v", err)
	}
	s2, err := idbstore.Open(ctx, s.Name())
	require.NoError(t, err)
	defer s2.Close()
	g, err := s2.Get(ctx, "a")
	if err != nil || storetest.SameRecord(a.Record, g) != "" {
		t.Fatalf("record after reopen: %+v %v", g, err)
	}
	if p, err := s2.Payload(ctx, g.PayloadRef); err != nil || !bytes.Equal(p, big) {
		t.Fatalf("blob after reopen: %v", err)
	}
	l, found, err := s2.GetLease(ctx, "flush")
	if !found || err != nil || l.Token != lease.Token || l.Owner != "tab1" {
		t.Fatalf("lease after reopen: %+v %v", l, err)
	}
	st, err := s2.Status(ctx)
	if err != nil || st.Pending != 1 || len(st.AuthPaused) != 1 {
		t.Fatalf("status after reopen: %+v %v", st, err)
	}
	// The seq counter survived too.
	b := enq(t, s2, storetest.NewRecord("b", "alice", "comment", "", "n1", nil), 0)
	if b.Record.Seq != a.Record.Seq+1 {
		t.Fatalf("seq %d after %d", b.Record.Seq, a.Record.Seq)
	}
}

// A failure after the writes were issued (injected between the puts and the
// commit) rolls back every write of the method: record, blob and counter.
func TestIDBAbortMidwayLeavesNothing(t *testing.T) {
	ctx := context.Background()
	s := openFresh(t)
	first := enq(t, s, storetest.NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	boom := errors.New("injected failure")
	for _, op := range []string{"enqueue", "amend", "update lease", "update meta", "delete"} {
		idbstore.SetIDBTestHook(func(o, stage string) error {
			if o == op {
				return boom
			}
			return nil
		})
		var err error
		switch op {
		case "enqueue":
			_, err = s.Enqueue(ctx, queue.EnqueueRequest{Record: storetest.NewRecord("b", "alice", "comment", "", "n1", bytes.Repeat([]byte("x"), 50)), Policy: queue.Policy{Dedupe: queue.Append}, InlineLimit: 10})
		case "amend":
			_, err = s.Amend(ctx, "a", func(r *queue.Record) error { r.MaxAttempts = 42; return nil })
		case "update lease":
			_, err = s.UpdateLease(ctx, "flush", queue.AcquireLease("tab9", storetest.T0, time.Minute, true))
		case "update meta":
			_, err = s.UpdateMeta(ctx, func(m *outbox.Meta) error { m.Paused = true; return nil })
		case "delete":
			_, err = s.Delete(ctx, outbox.Filter{})
		}
		idbstore.SetIDBTestHook(nil)
		if !errors.Is(err, boom) {
			t.Fatalf("%s: got %v", op, err)
		}
	}
	idbstore.SetIDBTestHook(nil)
	_, err := s.UpdateLease(ctx, "flush", queue.AcquireLease("tab1", storetest.T0, time.Minute, true))
	require.NoError(t, err)
	rs, err := s.List(ctx, outbox.Filter{})
	if err != nil || len(rs) != 1 || storetest.SameRecord(first.Record, rs[0]) != "" {
		t.Fatalf("store changed: %+v %v", rs, err)
	}
	if _, err := s.Payload(ctx, "blob:b"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("blob of the aborted enqueue: %v", err)
	}
	if l, _, _ := s.GetLease(ctx, "flush"); l.Owner != "tab1" || l.Token != 1 {
		t.Fatalf("lease changed: %+v", l)
	}
	if st, _ := s.Status(ctx); st.Paused {
		t.Fatal("meta changed")
	}
	b := enq(t, s, storetest.NewRecord("b", "alice", "comment", "", "n2", nil), 0)
	if b.Record.Seq != first.Record.Seq+1 {
		t.Fatalf("seq counter moved: %d after %d", b.Record.Seq, first.Record.Seq)
	}
	// Update under a lease: the failed charge leaves the claimed record.
	l, _, _ := s.GetLease(ctx, "flush")
	claimed, err := s.Claim(ctx, queue.ClaimRequest{Lease: l, Now: storetest.T0, Limit: 1, LeaseTTL: time.Minute, UserID: "alice", TenantID: "t1", Schema: queue.SchemaGate{Version: 1}})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim %v", err)
	}
	charge := func(l queue.Lease, at time.Time) error {
		_, err := s.UpdateBatch(ctx, l, []outbox.RecordUpdate{{ID: claimed[0].ID, Take: true, Fn: func(r *queue.Record) error {
			n, err := queue.Charge(*r, l, at, time.Minute, time.Time{})
			*r = n
			return err
		}}})
		return err
	}
	idbstore.SetIDBTestHook(func(o, _ string) error {
		if o == "update batch" {
			return boom
		}
		return nil
	})
	err = charge(l, storetest.T0)
	idbstore.SetIDBTestHook(nil)
	if !errors.Is(err, boom) {
		t.Fatalf("update: %v", err)
	}
	if g, _ := s.Get(ctx, claimed[0].ID); storetest.SameRecord(claimed[0], g) != "" {
		t.Fatalf("aborted update changed the record: %+v", g)
	}
	// A claim that writes (it recovers a dead owner's record) and fails
	// after its writes leaves the record as it was.
	require.NoError(t, charge(l, storetest.T0))
	sending, _ := s.Get(ctx, claimed[0].ID)
	later := storetest.T0.Add(time.Hour)
	l2, err := s.UpdateLease(ctx, "flush", queue.AcquireLease("tab2", later, time.Minute, true))
	require.NoError(t, err)
	idbstore.SetIDBTestHook(func(o, _ string) error {
		if o == "claim" {
			return boom
		}
		return nil
	})
	_, err = s.Claim(ctx, queue.ClaimRequest{Lease: l2, Now: later, Limit: 5, LeaseTTL: time.Minute, UserID: "alice", TenantID: "t1", Schema: queue.SchemaGate{Version: 1}})
	idbstore.SetIDBTestHook(nil)
	if !errors.Is(err, boom) {
		t.Fatalf("claim: %v", err)
	}
	if g, _ := s.Get(ctx, claimed[0].ID); g.Status != queue.StatusSending || storetest.SameRecord(sending, g) != "" {
		t.Fatalf("aborted claim changed the record: %+v", g)
	}
}

// Real quota: a Storage Bucket with a small quota, where Chromium supports
// the Storage Buckets API.
func TestIDBRealQuota(t *testing.T) {
	ctx := context.Background()
	sb := js.Global().Get("navigator").Get("storageBuckets")
	if sb.Type() != js.TypeObject {
		t.Skip("navigator.storageBuckets unavailable: quota covered by TestIDBAbortErrorMapsQuota only")
	}
	bucket, err := jsglue.Await(ctx, sb.Call("open", "tf-quota-"+strconv.FormatInt(time.Now().UnixNano(), 36), map[string]any{"quota": 256 << 10}))
	if err != nil {
		t.Skipf("storage bucket with a quota refused: %v", err)
	}
	s, err := idbstore.Open(ctx, dbName("quota"), idbstore.WithIDBFactory(bucket.Get("indexedDB")))
	require.NoError(t, err)
	defer s.Close()
	payload := bytes.Repeat([]byte("q"), 48<<10)
	var qerr error
	n := 0
	for i := 0; i < 64 && qerr == nil; i++ {
		// Vary the payload so compression cannot hide it.
		p := append([]byte(strconv.Itoa(i)), payload...)
		for j := range p {
			p[j] ^= byte(j*31 + i*7)
		}
		_, qerr = s.Enqueue(ctx, queue.EnqueueRequest{Record: storetest.NewRecord("q"+strconv.Itoa(i), "alice", "comment", "", "", p), Policy: queue.Policy{Dedupe: queue.Append}, InlineLimit: 1024})
		if qerr == nil {
			n++
		}
	}
	if qerr == nil {
		t.Skip("a 256 KiB bucket quota was not enforced within 3 MiB of writes")
	}
	if !errors.Is(qerr, jsglue.ErrQuotaExceeded) || !errors.Is(qerr, outbox.ErrTxAborted) {
		t.Fatalf("quota error not mapped: %v", qerr)
	}
	t.Logf("quota hit after %d enqueues: %v", n, qerr)
	rs, err := s.List(ctx, outbox.Filter{})
	if err != nil || len(rs) != n {
		t.Fatalf("after quota: %d records (want %d), %v", len(rs), n, err)
	}
	if _, err := s.Payload(ctx, "blob:q"+strconv.Itoa(n)); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("blob of the failed enqueue was kept: %v", err)
	}
}

func TestIDBGarbageAndNewerRecords(t *testing.T) {
	ctx := context.Background()
	var seen atomic.Int64
	s := openFresh(t, idbstore.WithOnCorrupt(func(error) { seen.Add(1) }))
	enq(t, s, storetest.NewRecord("good", "alice", "comment", "", "n1", nil), 0)
	for _, src := range []string{
		`({id: "g1", seq: 101})`,
		`({id: "g2", v: 1, status: "pending", seq: 102, userId: 5, _live: 2})`,
		`({id: "g3", v: 1, status: "pending", seq: -1, userId: "alice", _live: 3})`,
		`({id: "g4", v: 1, status: "pending", seq: 104, userId: "alice", payload: "not bytes", _live: 4})`,
		`({id: "g5", v: 1, status: "pending", seq: 105, userId: "alice", lastError: [1,2], _live: 5})`,
		`({id: "g6", v: "1", status: "pending", seq: 106, userId: "alice", _live: 6})`,
		`({id: "g7", v: 1, status: "pending", seq: 107, userId: "alice", createdAt: "yesterday", _live: 7})`,
		`({id: "g8", v: 1, status: "pending", seq: 108, userId: "alice", dependencyIds: [1], _live: 8})`,
	} {
		rawPut(t, s.Name(), "records", jsEval(src))
	}
	rs, err := s.List(ctx, outbox.Filter{})
	if err != nil || len(rs) != 1 || rs[0].ID != "good" {
		t.Fatalf("list: %+v %v", rs, err)
	}
	if seen.Load() != 8 || s.Corrupt() != 8 {
		t.Fatalf("reported %d corrupt records (counter %d), want 8", seen.Load(), s.Corrupt())
	}
	for _, id := range []string{"g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8"} {
		var ce *idbstore.CorruptRecordError
		if _, err := s.Get(ctx, id); !errors.As(err, &ce) || !errors.Is(err, outbox.ErrCorruptRecord) {
			t.Fatalf("get %s: %v", id, err)
		}
	}
	// Status counts by the stored status field (the status index), without
	// decoding records: the seven rows that say "pending" are counted as
	// such (g1 has no status and is not). They are reported as corrupt
	// whenever they are read, and never sent (Claim below).
	if st, err := s.Status(ctx); err != nil || st.Pending != 8 {
		t.Fatalf("status %+v %v", st, err)
	}
	// A record written by a newer build (encoding v99, an unknown field, a
	// newer payload schema) decodes, is left alone by Claim, and keeps its
	// unknown fields when this build updates it.
	rawPut(t, s.Name(), "records", jsEval(`({id: "future", v: 99, status: "pending", seq: 50, userId: "alice", tenantId: "t1",
		idempotencyKey: "kf", payloadSchemaVersion: 7, payload: new Uint8Array([1,2,3]), nextAttemptAt: 0,
		futureField: {nested: [1, "x"]}, _live: 50, _entity: "\u0001future"})`))
	l, err := s.UpdateLease(ctx, "flush", queue.AcquireLease("tab1", storetest.T0, time.Minute, true))
	require.NoError(t, err)
	got, err := s.Claim(ctx, queue.ClaimRequest{Lease: l, Now: storetest.T0, Limit: 10, LeaseTTL: time.Minute, UserID: "alice", TenantID: "t1", Schema: queue.SchemaGate{Version: 1}})
	if err != nil || len(got) != 1 || got[0].ID != "good" {
		t.Fatalf("claim: %+v %v", got, err)
	}
	f, err := s.Get(ctx, "future")
	if err != nil || f.PayloadSchemaVersion != 7 || !bytes.Equal(f.Payload, []byte{1, 2, 3}) || f.Status != queue.StatusPending {
		t.Fatalf("future record: %+v %v", f, err)
	}
	if _, err := s.Amend(ctx, "future", func(r *queue.Record) error { r.MaxAttempts = 9; return nil }); err != nil {
		t.Fatal(err)
	}
	raw := rawGet(t, s.Name(), "records", "future")
	if raw.Get("v").Int() != 99 || raw.Get("futureField").Get("nested").Index(1).String() != "x" || raw.Get("maxAttempts").Int() != 9 {
		t.Fatalf("newer fields lost: %v", js.Global().Get("JSON").Call("stringify", raw).String())
	}
	// Garbage is never rewritten by the store.
	if g := rawGet(t, s.Name(), "records", "g1"); g.Get("v").Type() != js.TypeUndefined {
		t.Fatal("garbage record was rewritten")
	}
}

// Two stores on one database behave like two tabs: each sees the other's
// writes, and the owner whose lease was taken over changes nothing.
func TestIDBTwoConnections(t *testing.T) {
	ctx := context.Background()
	s1 := openFresh(t)
	s2, err := idbstore.Open(ctx, s1.Name())
	require.NoError(t, err)
	defer s2.Close()
	enq(t, s1, storetest.NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	if r, err := s2.Get(ctx, "a"); err != nil || r.ID != "a" {
		t.Fatalf("second connection: %v", err)
	}
	l1, err := s1.UpdateLease(ctx, "flush", queue.AcquireLease("tab1", storetest.T0, time.Minute, false))
	require.NoError(t, err)
	if _, err := s2.UpdateLease(ctx, "flush", queue.AcquireLease("tab2", storetest.T0, time.Minute, false)); !errors.Is(err, queue.ErrLeaseHeld) {
		t.Fatalf("second tab took a held lease: %v", err)
	}
	claimed, err := s1.Claim(ctx, queue.ClaimRequest{Lease: l1, Now: storetest.T0, Limit: 5, LeaseTTL: time.Minute, UserID: "alice", TenantID: "t1"})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim %v", err)
	}
	l2, err := s2.UpdateLease(ctx, "flush", queue.AcquireLease("tab2", storetest.T0, time.Minute, true))
	if err != nil || l2.Token != l1.Token+1 {
		t.Fatalf("steal %+v %v", l2, err)
	}
	before, _ := s2.Get(ctx, "a")
	_, err = storetest.Update(s1, l1, "a", func(r *queue.Record) error {
		n, err := queue.MarkSending(*r, l1, storetest.T0)
		*r = n
		return err
	})
	if !errors.Is(err, queue.ErrStaleOwner) {
		t.Fatalf("stale owner's update: %v", err)
	}
	after, _ := s2.Get(ctx, "a")
	if storetest.SameRecord(before, after) != "" {
		t.Fatalf("stale owner changed the record: %+v", after)
	}
	if _, err := s1.Claim(ctx, queue.ClaimRequest{Lease: l1, Now: storetest.T0, Limit: 5, LeaseTTL: time.Minute, UserID: "alice", TenantID: "t1"}); !errors.Is(err, queue.ErrStaleOwner) {
		t.Fatalf("stale claim: %v", err)
	}
}

// Another tab deleting or upgrading the database closes this connection at
// once (never blocking the other tab), tells the app why, and every later
// call fails with a typed error.
func TestIDBVersionChange(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		action string
		want   error
	}{
		{"delete", `(n) => new Promise((res, rej) => { const q = indexedDB.deleteDatabase(n); q.onsuccess = () => res(); q.onerror = () => rej(q.error); q.onblocked = () => rej(new Error("blocked")); })`, outbox.ErrStoreDeleted},
		// A newer build's schema version (any version above ours).
		{"upgrade", `(n) => new Promise((res, rej) => { const q = indexedDB.open(n, 1000); q.onsuccess = () => { q.result.close(); res(); }; q.onerror = () => rej(q.error); q.onblocked = () => rej(new Error("blocked")); })`, outbox.ErrStoreUpgraded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			closed := make(chan error, 1)
			s := openFresh(t, idbstore.WithOnClose(func(err error) { closed <- err }))
			enq(t, s, storetest.NewRecord("a", "alice", "comment", "", "", nil), 0)
			if _, err := jsglue.Await(ctx, jsEval(tc.action).Invoke(s.Name())); err != nil {
				t.Fatalf("other tab: %v", err)
			}
			select {
			case err := <-closed:
				if err != tc.want {
					t.Fatalf("closed with %v, want %v", err, tc.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no close notification")
			}
			<-s.Done()
			if _, err := s.Get(ctx, "a"); !errors.Is(err, outbox.ErrStoreClosed) || !errors.Is(err, tc.want) {
				t.Fatalf("call after %s: %v", tc.name, err)
			}
		})
	}
	// Opening with an older schema than the database's is a typed error.
	name := dbName("newer-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	if _, err := jsglue.Await(ctx, jsEval(`(n) => new Promise((res, rej) => { const q = indexedDB.open(n, 5); q.onsuccess = () => { q.result.close(); res(); }; q.onerror = () => rej(q.error); })`).Invoke(name)); err != nil {
		t.Fatal(err)
	}
	if _, err := idbstore.Open(ctx, name); !errors.Is(err, jsglue.ErrVersion) {
		t.Fatalf("open of a newer database: %v", err)
	}
}

func TestIDBBenchEnqueue(t *testing.T) {
	for _, d := range []string{"strict", "default", "relaxed"} {
		s := openFresh(t, idbstore.WithDurability(d))
		took, err := benchEnqueue(context.Background(), s, 200)
		require.NoError(t, err)
		t.Logf("durability %s: 200 durable enqueues in %v (%.0f/s)", d, took, 200/took.Seconds())
	}
}
