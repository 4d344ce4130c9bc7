// Package storetest is the conformance suite of outbox.Store: every method's
// contract as outbox.MemStore (the executable specification) implements it.
// It runs natively against MemStore and in Chromium against the IndexedDB
// store, so the two cannot drift.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/wire"
)

// Options extends the suite with store-specific capabilities.
type Options struct {
	// InjectCorrupt writes an undecodable record under id, bypassing the
	// Store API (raw JavaScript for IndexedDB). nil skips the corrupt-record
	// subtests.
	InjectCorrupt func(t *testing.T, s outbox.Store, id string)
	// ErrCorrupt is what Get returns for such a record (errors.Is).
	ErrCorrupt error
	// FlushRecords is how many records the end-to-end flush subtest
	// enqueues and flushes; default 200.
	FlushRecords int
}

// Run runs the suite; open returns a fresh, empty store for each subtest.
func Run(t *testing.T, open func(t *testing.T) outbox.Store) { RunWith(t, open, Options{}) }

// RunWith runs the suite with store-specific options.
func RunWith(t *testing.T, open func(t *testing.T) outbox.Store, opts Options) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s outbox.Store)
	}{
		{"EnqueueAppendAssignsIncreasingSeq", testAppend},
		{"EnqueueReplaceLatest", testReplace},
		{"EnqueueReplaceAfterSendAppends", testReplaceAfterSend},
		{"EnqueueMerge", testMerge},
		{"EnqueueDropIfExists", testDrop},
		{"EnqueueOtherUserIsUnrelated", testOtherUser},
		{"EnqueueBlobPayloads", testBlob},
		{"EnqueueInvalidWritesNothing", testInvalid},
		{"CancelledContextWritesNothing", testCancelled},
		{"ClaimRequiresCurrentLease", testClaimStale},
		{"ClaimBatchInSeqOrder", testClaimBatch},
		{"ClaimRecoversExpiredLeases", testClaimRecover},
		{"ClaimLeavesNewerSchemaAlone", testNewerSchema},
		{"ClaimLongQueueAsPlanned", testClaimLongQueue},
		{"UpdateStaleOwnerChangesNothing", testUpdateStale},
		{"UpdateAppliesFnAtomically", testUpdateFn},
		{"UpdateBatchOneTransaction", testUpdateBatch},
		{"UpdateBatchStaleOwnerChangesNothing", testUpdateBatchStale},
		{"Amend", testAmend},
		{"DeleteByFilter", testDelete},
		{"DeleteAckedBeforeCompacts", testCompact},
		{"ListFiltersInSeqOrder", testList},
		{"StatusProjection", testStatus},
		{"LeaseAcquireRenewRelease", testLease},
		{"Meta", testMeta},
		{"MetaSession", testMetaSession},
		{"RecordRoundTrip", testRoundTrip},
		{"FlushEndToEnd", func(t *testing.T, s outbox.Store) { testFlush(t, s, opts.FlushRecords) }},
		{"CorruptRecordIsReportedNotFatal", func(t *testing.T, s outbox.Store) {
			if opts.InjectCorrupt == nil {
				t.Skip("store cannot hold a corrupt record")
			}
			testCorrupt(t, s, opts)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// T0 is the suite's clock origin: whole milliseconds, since stores may keep
// times at millisecond precision.
var T0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

var bg = context.Background()

var policies = map[string]outbox.Policy{
	"comment": {Dedupe: outbox.Append},
	"title":   {Dedupe: outbox.ReplaceLatest},
	"tags": {Dedupe: outbox.Merge, Merge: func(a, b []byte) ([]byte, error) {
		return append(append(append([]byte{}, a...), ','), b...), nil
	}},
	"star": {Dedupe: outbox.DropIfExists},
}

// NewRecord returns a valid record to enqueue.
func NewRecord(id, user, opType, opKey, entity string, payload []byte) outbox.Record {
	return outbox.Record{
		ID: id, IdempotencyKey: "key-" + id, OperationType: opType, OperationKey: opKey,
		EntityType: "note", EntityID: entity, Payload: payload, PayloadSchemaVersion: 1,
		Status: outbox.StatusPending, MaxAttempts: 3, NextAttemptAt: T0,
		CreatedAt: T0, UpdatedAt: T0, UserID: user, TenantID: "t1", AuthGeneration: 1,
	}
}

func enqueue(t *testing.T, s outbox.Store, r outbox.Record, inline int) outbox.EnqueueResult {
	t.Helper()
	res, err := s.Enqueue(bg, outbox.EnqueueRequest{Record: r, Policy: policies[r.OperationType], InlineLimit: inline})
	if err != nil {
		t.Fatalf("enqueue %s: %v", r.ID, err)
	}
	return res
}

func get(t *testing.T, s outbox.Store, id string) outbox.Record {
	t.Helper()
	r, err := s.Get(bg, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return r
}

func list(t *testing.T, s outbox.Store, f outbox.Filter) []outbox.Record {
	t.Helper()
	rs, err := s.List(bg, f)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return rs
}

func ids(rs []outbox.Record) string {
	out := ""
	for i, r := range rs {
		if i > 0 {
			out += ","
		}
		out += r.ID
	}
	return out
}

func acquire(t *testing.T, s outbox.Store, owner string, now time.Time, steal bool) outbox.Lease {
	t.Helper()
	l, err := s.UpdateLease(bg, "flush", outbox.AcquireLease(owner, now, 30*time.Second, steal))
	if err != nil {
		t.Fatalf("acquire %s: %v", owner, err)
	}
	return l
}

// claim plans a batch with Store.Claim, then takes every planned record
// into leased under l (a Take update running the Claim transition), as a
// caller that sends them does: the records it returns are the taken ones,
// as stored.
func claim(t *testing.T, s outbox.Store, l outbox.Lease, user string, now time.Time, limit int) []outbox.Record {
	t.Helper()
	rs, err := s.Claim(bg, outbox.ClaimRequest{Lease: l, Now: now, Limit: limit, LeaseTTL: 30 * time.Second, UserID: user, TenantID: "t1", Schema: outbox.SchemaGate{Version: 1}})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return take(t, s, l, now, rs, func(r outbox.Record) (outbox.Record, error) { return outbox.Claim(r, l, now, 30*time.Second) })
}

// take applies tr to every record of rs as Take updates of one UpdateBatch
// under l, and returns the records as written.
func take(t *testing.T, s outbox.Store, l outbox.Lease, now time.Time, rs []outbox.Record, tr func(outbox.Record) (outbox.Record, error)) []outbox.Record {
	t.Helper()
	if len(rs) == 0 {
		return rs
	}
	ups := make([]outbox.RecordUpdate, len(rs))
	for i := range rs {
		ups[i] = outbox.RecordUpdate{ID: rs[i].ID, Take: true, Fn: updateFn(tr)}
	}
	res, err := s.UpdateBatch(bg, l, ups)
	if err != nil {
		t.Fatalf("take: %v", err)
	}
	out := make([]outbox.Record, len(res))
	for i, u := range res {
		if u.Err != nil {
			t.Fatalf("take %s: %v", rs[i].ID, u.Err)
		}
		out[i] = u.Record
	}
	return out
}

func transition(t *testing.T, s outbox.Store, l outbox.Lease, id string, tr func(outbox.Record) (outbox.Record, error)) outbox.Record {
	t.Helper()
	r, err := Update(s, l, id, func(r *outbox.Record) error {
		n, err := tr(*r)
		if err != nil {
			return err
		}
		*r = n
		return nil
	})
	if err != nil {
		t.Fatalf("update %s: %v", id, err)
	}
	return r
}

// SameRecord reports the first difference between two records, comparing
// times at millisecond precision; "" when they are equal.
func SameRecord(a, b outbox.Record) string {
	ms := func(x time.Time) int64 {
		if x.IsZero() {
			return 0
		}
		return x.UnixMilli()
	}
	type f struct {
		name string
		eq   bool
	}
	errEq := func(x, y *outbox.ErrorInfo) bool {
		if x == nil || y == nil {
			return x == y
		}
		return x.Code == y.Code && x.Message == y.Message && x.Status == y.Status && ms(x.At) == ms(y.At)
	}
	respEq := func(x, y *outbox.StoredResponse) bool {
		if x == nil || y == nil {
			return x == y
		}
		return x.Status == y.Status && bytes.Equal(x.Body, y.Body) && x.Replayed == y.Replayed
	}
	strsEq := func(x, y []string) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	for _, c := range []f{
		{"ID", a.ID == b.ID}, {"OperationKey", a.OperationKey == b.OperationKey},
		{"IdempotencyKey", a.IdempotencyKey == b.IdempotencyKey}, {"EntityType", a.EntityType == b.EntityType},
		{"EntityID", a.EntityID == b.EntityID}, {"OperationType", a.OperationType == b.OperationType},
		{"Payload", bytes.Equal(a.Payload, b.Payload)}, {"PayloadRef", a.PayloadRef == b.PayloadRef},
		{"PayloadHash", a.PayloadHash == b.PayloadHash}, {"PayloadSchemaVersion", a.PayloadSchemaVersion == b.PayloadSchemaVersion},
		{"Status", a.Status == b.Status}, {"Attempts", a.Attempts == b.Attempts}, {"Sends", a.Sends == b.Sends},
		{"MaxAttempts", a.MaxAttempts == b.MaxAttempts}, {"NextAttemptAt", ms(a.NextAttemptAt) == ms(b.NextAttemptAt)},
		{"LastError", errEq(a.LastError, b.LastError)}, {"LeaseOwner", a.LeaseOwner == b.LeaseOwner},
		{"LeaseToken", a.LeaseToken == b.LeaseToken}, {"LeaseExpiresAt", ms(a.LeaseExpiresAt) == ms(b.LeaseExpiresAt)},
		{"DependencyIDs", strsEq(a.DependencyIDs, b.DependencyIDs)}, {"Seq", a.Seq == b.Seq},
		{"CreatedAt", ms(a.CreatedAt) == ms(b.CreatedAt)}, {"UpdatedAt", ms(a.UpdatedAt) == ms(b.UpdatedAt)},
		{"AckedAt", ms(a.AckedAt) == ms(b.AckedAt)}, {"Response", respEq(a.Response, b.Response)},
		{"UserID", a.UserID == b.UserID}, {"TenantID", a.TenantID == b.TenantID}, {"AuthGeneration", a.AuthGeneration == b.AuthGeneration},
	} {
		if !c.eq {
			return c.name
		}
	}
	return ""
}

func same(t *testing.T, want, got outbox.Record) {
	t.Helper()
	if d := SameRecord(want, got); d != "" {
		t.Fatalf("records differ in %s:\nwant %+v\ngot  %+v", d, want, got)
	}
}

func testAppend(t *testing.T, s outbox.Store) {
	a := enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", []byte("1")), 0)
	b := enqueue(t, s, NewRecord("b", "alice", "comment", "", "n1", []byte("2")), 0)
	if a.Action != outbox.ActionAppended || b.Action != outbox.ActionAppended || a.ID != "a" || b.ID != "b" {
		t.Fatalf("actions %v %v", a, b)
	}
	if a.Record.Seq == 0 || b.Record.Seq <= a.Record.Seq {
		t.Fatalf("seq not increasing: %d %d", a.Record.Seq, b.Record.Seq)
	}
	same(t, a.Record, get(t, s, "a"))
	same(t, b.Record, get(t, s, "b"))
	if g := get(t, s, "a"); g.PayloadHash != outbox.HashPayload([]byte("1")) || g.Status != outbox.StatusPending {
		t.Fatalf("stored %+v", g)
	}
}

func testReplace(t *testing.T, s outbox.Store) {
	a := enqueue(t, s, NewRecord("a", "alice", "title", "title:n1", "n1", []byte(`"draft"`)), 0)
	r2 := NewRecord("b", "alice", "title", "title:n1", "n1", []byte(`"final"`))
	r2.CreatedAt = T0.Add(time.Second)
	b := enqueue(t, s, r2, 0)
	if b.Action != outbox.ActionReplaced || b.ID != "a" {
		t.Fatalf("got %+v", b)
	}
	g := get(t, s, "a")
	if string(g.Payload) != `"final"` || g.PayloadHash != outbox.HashPayload([]byte(`"final"`)) || g.Seq != a.Record.Seq || g.IdempotencyKey != "key-a" {
		t.Fatalf("stored %+v", g)
	}
	same(t, b.Record, g)
	if rs := list(t, s, outbox.Filter{}); len(rs) != 1 {
		t.Fatalf("want 1 record, got %s", ids(rs))
	}
}

func testReplaceAfterSend(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "title", "title:n1", "n1", []byte("1")), 0)
	l := acquire(t, s, "tab1", T0, true)
	if got := claim(t, s, l, "alice", T0, 10); len(got) != 1 {
		t.Fatalf("claimed %d", len(got))
	}
	transition(t, s, l, "a", func(r outbox.Record) (outbox.Record, error) { return outbox.MarkSending(r, l, T0) })
	b := enqueue(t, s, NewRecord("b", "alice", "title", "title:n1", "n1", []byte("2")), 0)
	if b.Action != outbox.ActionAppended || b.ID != "b" {
		t.Fatalf("a sent record must not be replaced: %+v", b)
	}
	if g := get(t, s, "a"); string(g.Payload) != "1" || g.Status != outbox.StatusSending {
		t.Fatalf("sent record changed: %+v", g)
	}
}

func testMerge(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "tags", "tags:n1", "n1", []byte("x")), 0)
	m := enqueue(t, s, NewRecord("b", "alice", "tags", "tags:n1", "n1", []byte("y")), 0)
	if m.Action != outbox.ActionMerged || m.ID != "a" || string(get(t, s, "a").Payload) != "x,y" {
		t.Fatalf("got %+v", m)
	}
}

func testDrop(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "star", "star:n1", "n1", []byte("1")), 0)
	d := enqueue(t, s, NewRecord("b", "alice", "star", "star:n1", "n1", []byte("2")), 0)
	if d.Action != outbox.ActionDropped || d.ID != "a" {
		t.Fatalf("got %+v", d)
	}
	if _, err := s.Get(bg, "b"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("dropped record stored: %v", err)
	}
	if g := get(t, s, "a"); string(g.Payload) != "1" {
		t.Fatalf("kept record changed: %+v", g)
	}
}

func testOtherUser(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "title", "title:n1", "n1", []byte("1")), 0)
	b := enqueue(t, s, NewRecord("b", "bob", "title", "title:n1", "n1", []byte("2")), 0)
	if b.Action != outbox.ActionAppended {
		t.Fatalf("another user's record was coalesced: %+v", b)
	}
	if string(get(t, s, "a").Payload) != "1" {
		t.Fatal("alice's record changed")
	}
}

func testBlob(t *testing.T, s outbox.Store) {
	big := bytes.Repeat([]byte("z"), 100)
	a := enqueue(t, s, NewRecord("a", "alice", "tags", "tags:n1", "n1", big), 8)
	if a.Record.PayloadRef == "" || a.Record.Payload != nil {
		t.Fatalf("payload above the limit not stored by reference: %+v", a.Record)
	}
	g := get(t, s, "a")
	if g.PayloadRef != a.Record.PayloadRef || len(g.Payload) != 0 || g.PayloadHash != outbox.HashPayload(big) {
		t.Fatalf("stored %+v", g)
	}
	p, err := s.Payload(bg, g.PayloadRef)
	if err != nil || !bytes.Equal(p, big) {
		t.Fatalf("payload %q %v", p, err)
	}
	// Merge loads the older blob and writes the merged one.
	m := enqueue(t, s, NewRecord("b", "alice", "tags", "tags:n1", "n1", []byte("y")), 8)
	if m.Action != outbox.ActionMerged {
		t.Fatalf("got %+v", m)
	}
	p, err = s.Payload(bg, m.Record.PayloadRef)
	if want := append(append([]byte{}, big...), ",y"...); err != nil || !bytes.Equal(p, want) {
		t.Fatalf("merged payload %q %v", p, err)
	}
	// A small replacement moves inline and deletes the blob.
	title := enqueue(t, s, NewRecord("t", "alice", "title", "title:n2", "n2", big), 8)
	r := enqueue(t, s, NewRecord("u", "alice", "title", "title:n2", "n2", []byte("s")), 8)
	if r.Action != outbox.ActionReplaced || r.Record.PayloadRef != "" || string(r.Record.Payload) != "s" {
		t.Fatalf("got %+v", r)
	}
	if _, err := s.Payload(bg, title.Record.PayloadRef); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("old blob kept: %v", err)
	}
	if g := get(t, s, "t"); string(g.Payload) != "s" || g.PayloadRef != "" {
		t.Fatalf("stored %+v", g)
	}
	// Deleting the record deletes its blob.
	ref := m.Record.PayloadRef
	if n, err := s.Delete(bg, outbox.Filter{IDs: []string{"a"}}); n != 1 || err != nil {
		t.Fatalf("delete %d %v", n, err)
	}
	if _, err := s.Payload(bg, ref); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("blob of deleted record kept: %v", err)
	}
	if _, err := s.Payload(bg, "blob:nothing"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("missing blob: %v", err)
	}
}

func testInvalid(t *testing.T, s outbox.Store) {
	r := NewRecord("a", "alice", "comment", "", "n1", nil)
	r.IdempotencyKey = ""
	if _, err := s.Enqueue(bg, outbox.EnqueueRequest{Record: r, Policy: policies["comment"]}); !errors.Is(err, outbox.ErrInvalidRecord) {
		t.Fatalf("got %v", err)
	}
	r = NewRecord("b", "alice", "comment", "", "n1", nil)
	if _, err := s.Enqueue(bg, outbox.EnqueueRequest{Record: r, Policy: outbox.Policy{Dedupe: "guess"}}); !errors.Is(err, outbox.ErrUnknownOperation) {
		t.Fatalf("got %v", err)
	}
	boom := errors.New("merge failed")
	enqueue(t, s, NewRecord("c", "alice", "tags", "k", "n1", []byte("1")), 0)
	_, err := s.Enqueue(bg, outbox.EnqueueRequest{Record: NewRecord("d", "alice", "tags", "k", "n1", []byte("2")),
		Policy: outbox.Policy{Dedupe: outbox.Merge, Merge: func(a, b []byte) ([]byte, error) { return nil, boom }}})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	if rs := list(t, s, outbox.Filter{}); ids(rs) != "c" || string(rs[0].Payload) != "1" {
		t.Fatalf("store changed: %s", ids(rs))
	}
	// The seq counter did not move either: the next append follows c.
	c := get(t, s, "c")
	e := enqueue(t, s, NewRecord("e", "alice", "comment", "", "n1", nil), 0)
	if e.Record.Seq <= c.Seq {
		t.Fatalf("seq %d after %d", e.Record.Seq, c.Seq)
	}
}

func testCancelled(t *testing.T, s outbox.Store) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := s.Enqueue(ctx, outbox.EnqueueRequest{Record: NewRecord("a", "alice", "comment", "", "", nil), Policy: policies["comment"]}); err == nil {
		t.Fatal("enqueue with a cancelled context succeeded")
	}
	if _, err := s.UpdateLease(ctx, "flush", outbox.AcquireLease("x", T0, time.Second, true)); err == nil {
		t.Fatal("lease with a cancelled context succeeded")
	}
	if rs := list(t, s, outbox.Filter{}); len(rs) != 0 {
		t.Fatalf("written: %s", ids(rs))
	}
	if _, found, err := s.GetLease(bg, "flush"); found || err != nil {
		t.Fatalf("lease written: %v %v", found, err)
	}
}

func testClaimStale(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	ghost := outbox.Lease{Name: "flush", Owner: "tab1", Token: 1}
	if _, err := s.Claim(bg, outbox.ClaimRequest{Lease: ghost, Now: T0, Limit: 5, LeaseTTL: time.Second, UserID: "alice", TenantID: "t1"}); !errors.Is(err, outbox.ErrStaleOwner) {
		t.Fatalf("claim without a lease row: %v", err)
	}
	l1 := acquire(t, s, "tab1", T0, true)
	acquire(t, s, "tab2", T0, true)
	if _, err := s.Claim(bg, outbox.ClaimRequest{Lease: l1, Now: T0, Limit: 5, LeaseTTL: time.Second, UserID: "alice", TenantID: "t1"}); !errors.Is(err, outbox.ErrStaleOwner) {
		t.Fatalf("claim with a stale lease: %v", err)
	}
	if g := get(t, s, "a"); g.Status != outbox.StatusPending || g.LeaseOwner != "" {
		t.Fatalf("stale claim changed the record: %+v", g)
	}
}

func testClaimBatch(t *testing.T, s outbox.Store) {
	for i, e := range []string{"n1", "n2", "n1", "n3", "n2"} {
		enqueue(t, s, NewRecord("r"+strconv.Itoa(i), "alice", "comment", "", e, nil), 0)
	}
	enqueue(t, s, NewRecord("bob1", "bob", "comment", "", "n1", nil), 0)
	l := acquire(t, s, "tab1", T0, true)
	// A claim plans and writes nothing: the records stay waiting, as stored.
	planned, err := s.Claim(bg, outbox.ClaimRequest{Lease: l, Now: T0, Limit: 3, LeaseTTL: 30 * time.Second, UserID: "alice", TenantID: "t1", Schema: outbox.SchemaGate{Version: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range planned {
		g := get(t, s, r.ID)
		same(t, r, g)
		if g.Status != outbox.StatusPending || g.LeaseOwner != "" {
			t.Fatalf("a claim wrote %+v", g)
		}
	}
	// Only a Take update may change a record the lease does not hold yet.
	if _, err := Update(s, l, "r0", updateFn(func(r outbox.Record) (outbox.Record, error) { return outbox.Claim(r, l, T0, time.Minute) })); !errors.Is(err, outbox.ErrStaleOwner) {
		t.Fatalf("a plain update of a waiting record: %v", err)
	}
	got := claim(t, s, l, "alice", T0, 3)
	// Lanes by head seq: n1 (r0, r2), n2 (r1) — at most 3 records.
	if ids(got) != "r0,r2,r1" || ids(planned) != ids(got) {
		t.Fatalf("claimed %s, planned %s", ids(got), ids(planned))
	}
	for _, r := range got {
		g := get(t, s, r.ID)
		same(t, r, g)
		if g.Status != outbox.StatusLeased || g.LeaseOwner != "tab1" || g.LeaseToken != l.Token || !g.LeaseExpiresAt.Equal(T0.Add(30*time.Second)) {
			t.Fatalf("stored %+v", g)
		}
	}
	if g := get(t, s, "r3"); g.Status != outbox.StatusPending {
		t.Fatalf("unclaimed record changed: %+v", g)
	}
	if g := get(t, s, "bob1"); g.Status != outbox.StatusPending {
		t.Fatal("another user's record was claimed")
	}
	// The next claim continues with what is left and due.
	if got := claim(t, s, l, "alice", T0, 10); ids(got) != "r3" {
		t.Fatalf("second claim %s (n2's r4 waits behind leased r1)", ids(got))
	}
	// A take refuses what is not waiting (leased by this lease already) and
	// writes nothing for it; the batch's other takes go ahead.
	res, err := s.UpdateBatch(bg, l, []outbox.RecordUpdate{
		{ID: "r0", Take: true, Fn: updateFn(func(r outbox.Record) (outbox.Record, error) { return outbox.Charge(r, l, T0, time.Minute, time.Time{}) })},
		{ID: "r4", Take: true, Fn: updateFn(func(r outbox.Record) (outbox.Record, error) { return outbox.Charge(r, l, T0, time.Minute, time.Time{}) })},
	})
	if err != nil || !errors.Is(res[0].Err, outbox.ErrInvalidTransition) || res[1].Err != nil {
		t.Fatalf("takes: %v %+v", err, res)
	}
	if g := get(t, s, "r0"); g.Status != outbox.StatusLeased || g.Attempts != 0 {
		t.Fatalf("a refused take changed %+v", g)
	}
	if g := get(t, s, "r4"); g.Status != outbox.StatusSending || g.Attempts != 1 || g.Sends != 1 || g.LeaseOwner != "tab1" || g.LeaseToken != l.Token {
		t.Fatalf("charged %+v", g)
	}
	// A take must lease the record to the batch's lease.
	res, err = s.UpdateBatch(bg, l, []outbox.RecordUpdate{{ID: "bob1", Take: true, Fn: func(r *outbox.Record) error { r.Attempts = 7; return nil }}})
	if err != nil || !errors.Is(res[0].Err, outbox.ErrInvalidRecord) {
		t.Fatalf("a take that does not lease: %v %+v", err, res)
	}
	if g := get(t, s, "bob1"); g.Status != outbox.StatusPending || g.Attempts != 0 {
		t.Fatalf("a refused take changed %+v", g)
	}
}

func testClaimRecover(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	l1 := acquire(t, s, "tab1", T0, true)
	claim(t, s, l1, "alice", T0, 10)
	transition(t, s, l1, "a", func(r outbox.Record) (outbox.Record, error) { return outbox.MarkSending(r, l1, T0) })
	later := T0.Add(time.Minute)
	l2 := acquire(t, s, "tab2", later, true)
	got := claim(t, s, l2, "alice", later, 10)
	if ids(got) != "a" || got[0].LeaseOwner != "tab2" || got[0].Attempts != 1 || got[0].LastError == nil || got[0].LastError.Code != "lease_expired" {
		t.Fatalf("claimed %+v", got)
	}
	same(t, got[0], get(t, s, "a"))
}

func testNewerSchema(t *testing.T, s outbox.Store) {
	r := NewRecord("future", "alice", "comment", "", "n1", []byte("v9 payload"))
	r.PayloadSchemaVersion = 9
	r.DependencyIDs = []string{"x", "y"}
	stored := enqueue(t, s, r, 0).Record
	l := acquire(t, s, "tab1", T0, true)
	if got := claim(t, s, l, "alice", T0, 10); len(got) != 0 {
		t.Fatalf("a newer schema was claimed: %s", ids(got))
	}
	same(t, stored, get(t, s, "future"))
	if rs := list(t, s, outbox.Filter{MinSchemaVersion: 2}); ids(rs) != "future" {
		t.Fatalf("listed %s", ids(rs))
	}
}

func testUpdateStale(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	enqueue(t, s, NewRecord("b", "alice", "comment", "", "n2", nil), 0)
	l1 := acquire(t, s, "tab1", T0, true)
	claim(t, s, l1, "alice", T0, 10)
	before := get(t, s, "a")
	l2 := acquire(t, s, "tab2", T0.Add(time.Second), true)
	called := false
	_, err := Update(s, l1, "a", func(r *outbox.Record) error { called = true; r.Status = outbox.StatusAcked; return nil })
	if !errors.Is(err, outbox.ErrStaleOwner) || called {
		t.Fatalf("stale update: %v (fn called %v)", err, called)
	}
	same(t, before, get(t, s, "a"))
	// The current owner cannot touch a record leased to the old one either.
	_, err = Update(s, l2, "a", func(r *outbox.Record) error { called = true; return nil })
	if !errors.Is(err, outbox.ErrStaleOwner) || called {
		t.Fatalf("update of a record leased to another token: %v", err)
	}
	same(t, before, get(t, s, "a"))
	if _, err := Update(s, l2, "missing", func(*outbox.Record) error { return nil }); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("missing record: %v", err)
	}
}

func testUpdateFn(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", []byte("p")), 0)
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0, 10)
	before := get(t, s, "a")
	boom := errors.New("boom")
	if _, err := Update(s, l, "a", func(r *outbox.Record) error { r.Attempts = 99; return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	same(t, before, get(t, s, "a"))
	// A transition that refuses leaves the record unchanged too.
	if _, err := Update(s, l, "a", func(r *outbox.Record) error {
		n, err := outbox.Ack(*r, l, T0, outbox.StoredResponse{Status: 200})
		*r = n
		return err
	}); !errors.Is(err, outbox.ErrInvalidTransition) {
		t.Fatalf("ack of a leased record: %v", err)
	}
	same(t, before, get(t, s, "a"))
	sent := transition(t, s, l, "a", func(r outbox.Record) (outbox.Record, error) { return outbox.MarkSending(r, l, T0) })
	acked := transition(t, s, l, "a", func(r outbox.Record) (outbox.Record, error) {
		return outbox.Ack(r, l, T0.Add(time.Second), outbox.StoredResponse{Status: 201, Body: []byte(`{"ok":true}`), Replayed: true})
	})
	if sent.Attempts != 1 || acked.Status != outbox.StatusAcked || acked.Response == nil || string(acked.Response.Body) != `{"ok":true}` {
		t.Fatalf("got %+v", acked)
	}
	same(t, acked, get(t, s, "a"))
}

// updateFn adapts a transition to an UpdateBatch Fn.
func updateFn(tr func(outbox.Record) (outbox.Record, error)) func(*outbox.Record) error {
	return func(r *outbox.Record) error {
		n, err := tr(*r)
		if err != nil {
			return err
		}
		*r = n
		return nil
	}
}

// testUpdateBatch: the flush's step (ack the previous record of an entity,
// charge the next) and the group commit of several lanes, in one call: each
// update applies in order or fails alone.
func testUpdateBatch(t *testing.T, s outbox.Store) {
	for _, id := range []string{"a", "b", "c", "d"} {
		enqueue(t, s, NewRecord(id, "alice", "comment", "", "n-"+id, []byte("p-"+id)), 0)
	}
	enqueue(t, s, NewRecord("e", "alice", "comment", "", "n-e", nil), 0)
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0, 4) // a..d leased, e stays pending
	transition(t, s, l, "a", func(r outbox.Record) (outbox.Record, error) { return outbox.MarkSending(r, l, T0) })
	beforeD, beforeE := get(t, s, "d"), get(t, s, "e")
	boom := errors.New("boom")
	ackOK, order := false, ""
	res, err := s.UpdateBatch(bg, l, []outbox.RecordUpdate{
		{ID: "a", Fn: func(r *outbox.Record) error {
			order += "a"
			n, err := outbox.Ack(*r, l, T0.Add(time.Second), outbox.StoredResponse{Status: 201, Body: []byte("ok")})
			*r = n
			ackOK = err == nil
			return err
		}},
		{ID: "b", Fn: func(r *outbox.Record) error {
			order += "b"
			if !ackOK { // a Fn sees the outcome of the earlier ones
				return errors.New("ack not applied first")
			}
			return updateFn(func(r outbox.Record) (outbox.Record, error) { return outbox.MarkSending(r, l, T0) })(r)
		}},
		{ID: "missing", Fn: func(*outbox.Record) error { order += "!"; return nil }},
		{ID: "d", Fn: func(r *outbox.Record) error { order += "d"; r.Attempts = 99; return boom }},
		{ID: "e", Fn: func(r *outbox.Record) error { order += "e"; return nil }}, // not leased
		{ID: "c", Fn: updateFn(func(r outbox.Record) (outbox.Record, error) { return outbox.MarkSending(r, l, T0) })},
		{ID: "c", Fn: updateFn(func(r outbox.Record) (outbox.Record, error) { // sees the earlier change of c
			return outbox.Refund(r, l, T0.Add(2*time.Second), nil)
		})},
	})
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	if order != "abd" || len(res) != 7 {
		t.Fatalf("fns ran %q (want abd), %d results", order, len(res))
	}
	if res[0].Err != nil || res[0].Record.Status != outbox.StatusAcked || res[1].Err != nil || res[1].Record.Status != outbox.StatusSending || res[1].Record.Attempts != 1 {
		t.Fatalf("a, b: %+v / %+v", res[0], res[1])
	}
	if !errors.Is(res[2].Err, outbox.ErrNotFound) || !errors.Is(res[3].Err, boom) || !errors.Is(res[4].Err, outbox.ErrStaleOwner) {
		t.Fatalf("per-record errors: %v, %v, %v", res[2].Err, res[3].Err, res[4].Err)
	}
	if res[5].Err != nil || res[6].Err != nil || res[6].Record.Status != outbox.StatusPending || res[6].Record.Attempts != 0 {
		t.Fatalf("c: %+v / %+v", res[5], res[6])
	}
	same(t, res[0].Record, get(t, s, "a"))
	same(t, res[1].Record, get(t, s, "b"))
	same(t, res[6].Record, get(t, s, "c"))
	same(t, beforeD, get(t, s, "d"))
	same(t, beforeE, get(t, s, "e"))
	if a := get(t, s, "a"); a.Response == nil || string(a.Response.Body) != "ok" {
		t.Fatalf("a's response: %+v", a.Response)
	}
	// Nothing to write: no error, nothing changed.
	res, err = s.UpdateBatch(bg, l, []outbox.RecordUpdate{{ID: "d", Fn: func(*outbox.Record) error { return boom }}})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, boom) {
		t.Fatalf("all failing: %v %+v", err, res)
	}
	same(t, beforeD, get(t, s, "d"))
	// A cancelled context writes nothing.
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := s.UpdateBatch(ctx, l, []outbox.RecordUpdate{{ID: "d", Fn: updateFn(func(r outbox.Record) (outbox.Record, error) { return outbox.MarkSending(r, l, T0) })}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	same(t, beforeD, get(t, s, "d"))
}

// testUpdateBatchStale: a stale lease changes nothing and runs no Fn.
func testUpdateBatchStale(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	enqueue(t, s, NewRecord("b", "alice", "comment", "", "n2", nil), 0)
	l1 := acquire(t, s, "tab1", T0, true)
	claim(t, s, l1, "alice", T0, 10)
	transition(t, s, l1, "a", func(r outbox.Record) (outbox.Record, error) { return outbox.MarkSending(r, l1, T0) })
	beforeA, beforeB := get(t, s, "a"), get(t, s, "b")
	acquire(t, s, "tab2", T0.Add(time.Second), true)
	called := false
	fn := func(r *outbox.Record) error { called = true; r.Status = outbox.StatusAcked; return nil }
	res, err := s.UpdateBatch(bg, l1, []outbox.RecordUpdate{{ID: "a", Fn: fn}, {ID: "b", Fn: fn}})
	if !errors.Is(err, outbox.ErrStaleOwner) || called || res != nil {
		t.Fatalf("stale batch: %v (fn called %v, %d results)", err, called, len(res))
	}
	same(t, beforeA, get(t, s, "a"))
	same(t, beforeB, get(t, s, "b"))
}

func testAmend(t *testing.T, s outbox.Store) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	before := get(t, s, "a")
	retry := func(r *outbox.Record) error {
		n, err := outbox.AppRetry(*r, T0.Add(time.Hour))
		*r = n
		return err
	}
	if _, err := s.Amend(bg, "a", retry); !errors.Is(err, outbox.ErrInvalidTransition) {
		t.Fatalf("retry of a pending record: %v", err)
	}
	same(t, before, get(t, s, "a"))
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0, 10)
	transition(t, s, l, "a", func(r outbox.Record) (outbox.Record, error) { return outbox.MarkSending(r, l, T0) })
	transition(t, s, l, "a", func(r outbox.Record) (outbox.Record, error) {
		return outbox.Terminal(r, l, T0, outbox.ErrorInfo{Code: "http_422", Status: 422})
	})
	got, err := s.Amend(bg, "a", retry)
	if err != nil || got.Status != outbox.StatusPending || got.Attempts != 0 || got.LastError == nil {
		t.Fatalf("amend: %+v %v", got, err)
	}
	same(t, got, get(t, s, "a"))
	if _, err := s.Amend(bg, "missing", retry); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

func testDelete(t *testing.T, s outbox.Store) {
	for i := 0; i < 3; i++ {
		enqueue(t, s, NewRecord("a"+strconv.Itoa(i), "alice", "comment", "", "", bytes.Repeat([]byte("x"), 20)), 8)
		enqueue(t, s, NewRecord("b"+strconv.Itoa(i), "bob", "comment", "", "", nil), 0)
	}
	n, err := s.Delete(bg, outbox.Filter{UserID: "alice", Statuses: []outbox.Status{outbox.StatusDeadLetter}})
	if n != 0 || err != nil {
		t.Fatalf("deleted %d %v", n, err)
	}
	n, err = s.Delete(bg, outbox.Filter{UserID: "bob", Limit: 2})
	if n != 2 || err != nil {
		t.Fatalf("limit: deleted %d %v", n, err)
	}
	if rs := list(t, s, outbox.Filter{UserID: "bob"}); len(rs) != 1 {
		t.Fatalf("bob has %s", ids(rs))
	}
	n, err = s.Delete(bg, outbox.Filter{IDs: []string{"a1", "b0", "nope"}, UserID: "alice"})
	if n != 1 || err != nil {
		t.Fatalf("ids: deleted %d %v", n, err)
	}
	if _, err := s.Payload(bg, "blob:a1"); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("blob kept: %v", err)
	}
	n, err = s.Delete(bg, outbox.Filter{UserID: "alice"})
	if n != 2 || err != nil {
		t.Fatalf("user: deleted %d %v", n, err)
	}
	if rs := list(t, s, outbox.Filter{}); len(rs) != 1 || rs[0].UserID != "bob" {
		t.Fatalf("left %s", ids(rs))
	}
}

// testCompact: Filter.AckedBefore selects only acked records acknowledged
// before the cut-off (Outbox.Compact), never pending ones.
func testCompact(t *testing.T, s outbox.Store) {
	for i := 0; i < 3; i++ {
		enqueue(t, s, NewRecord("c"+strconv.Itoa(i), "alice", "comment", "", "", nil), 0)
	}
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0, 2) // c0, c1 leased
	for i, at := range []time.Time{T0, T0.Add(time.Hour)} {
		id := "c" + strconv.Itoa(i)
		transition(t, s, l, id, func(r outbox.Record) (outbox.Record, error) { return outbox.MarkSending(r, l, at) })
		transition(t, s, l, id, func(r outbox.Record) (outbox.Record, error) {
			return outbox.Ack(r, l, at, outbox.StoredResponse{Status: 200})
		})
	}
	n, err := s.Delete(bg, outbox.Filter{AckedBefore: T0.Add(time.Minute)})
	if n != 1 || err != nil {
		t.Fatalf("compact: deleted %d %v", n, err)
	}
	if got := ids(list(t, s, outbox.Filter{})); got != "c1,c2" {
		t.Fatalf("left %s", got)
	}
}

func testList(t *testing.T, s outbox.Store) {
	for i, u := range []string{"alice", "bob", "alice", "alice", "bob"} {
		r := NewRecord("r"+strconv.Itoa(i), u, "comment", "", "", nil)
		r.PayloadSchemaVersion = 1 + i%2
		enqueue(t, s, r, 0)
	}
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0, 1) // r0 leased
	for _, c := range []struct {
		f    outbox.Filter
		want string
	}{
		{outbox.Filter{}, "r0,r1,r2,r3,r4"},
		{outbox.Filter{UserID: "alice"}, "r0,r2,r3"},
		{outbox.Filter{UserID: "bob", Limit: 1}, "r1"},
		{outbox.Filter{Statuses: []outbox.Status{outbox.StatusLeased}}, "r0"},
		{outbox.Filter{Statuses: []outbox.Status{outbox.StatusPending, outbox.StatusLeased}, Limit: 3}, "r0,r1,r2"},
		{outbox.Filter{IDs: []string{"r4", "r0", "zz"}}, "r0,r4"},
		{outbox.Filter{MinSchemaVersion: 2}, "r1,r3"},
		{outbox.Filter{UserID: "alice", Statuses: []outbox.Status{outbox.StatusPending}}, "r2,r3"},
	} {
		if got := ids(list(t, s, c.f)); got != c.want {
			t.Errorf("List(%+v) = %s, want %s", c.f, got, c.want)
		}
	}
}

func testStatus(t *testing.T, s outbox.Store) {
	p, err := s.Status(bg)
	if err != nil || p.Pending+p.Sending+p.Acked != 0 || !p.OldestPendingAt.IsZero() {
		t.Fatalf("empty store: %+v %v", p, err)
	}
	for i := 0; i < 7; i++ {
		r := NewRecord("r"+strconv.Itoa(i), "alice", "comment", "", "e"+strconv.Itoa(i), nil)
		r.CreatedAt = T0.Add(time.Duration(i) * time.Second)
		enqueue(t, s, r, 0)
	}
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0.Add(time.Hour), 5) // r0..r4 leased
	send := func(id string) {
		transition(t, s, l, id, func(r outbox.Record) (outbox.Record, error) { return outbox.MarkSending(r, l, T0) })
	}
	for _, id := range []string{"r0", "r1", "r2", "r3"} {
		send(id)
	}
	transition(t, s, l, "r0", func(r outbox.Record) (outbox.Record, error) {
		return outbox.Ack(r, l, T0, outbox.StoredResponse{Status: 200})
	})
	transition(t, s, l, "r1", func(r outbox.Record) (outbox.Record, error) {
		return outbox.Retry(r, l, T0, T0.Add(time.Minute), outbox.ErrorInfo{Code: "http_503"})
	})
	transition(t, s, l, "r2", func(r outbox.Record) (outbox.Record, error) {
		return outbox.MarkConflict(r, l, T0, outbox.ErrorInfo{Code: "http_409"})
	})
	if _, err := s.UpdateMeta(bg, func(m *outbox.Meta) error { m.Paused = true; return nil }); err != nil {
		t.Fatal(err)
	}
	p, err = s.Status(bg)
	if err != nil {
		t.Fatal(err)
	}
	// r0 acked, r1 failed, r2 conflict, r3 sending, r4 leased, r5 r6 pending.
	if p.Acked != 1 || p.Failed != 1 || p.Conflict != 1 || p.Sending != 2 || p.Pending != 2 || p.DeadLetter != 0 || p.Terminal != 0 || !p.Paused {
		t.Fatalf("projection %+v", p)
	}
	if !p.OldestPendingAt.Equal(T0.Add(time.Second)) {
		t.Fatalf("oldest pending %v", p.OldestPendingAt)
	}
	if !p.LastAckAt.Equal(T0) {
		t.Fatalf("last ack %v, want r0's, %v", p.LastAckAt, T0)
	}
	// LastAckAt is the ack time of the acked record of the highest seq.
	transition(t, s, l, "r3", func(r outbox.Record) (outbox.Record, error) {
		return outbox.Ack(r, l, T0.Add(5*time.Second), outbox.StoredResponse{Status: 200})
	})
	if p, err = s.Status(bg); err != nil || p.Acked != 2 || !p.LastAckAt.Equal(T0.Add(5*time.Second)) {
		t.Fatalf("after r3's ack: %+v %v", p, err)
	}
}

func testLease(t *testing.T, s outbox.Store) {
	if _, found, err := s.GetLease(bg, "flush"); found || err != nil {
		t.Fatalf("fresh store has a lease: %v %v", found, err)
	}
	l1 := acquire(t, s, "tab1", T0, false)
	if l1.Token != 1 || l1.Owner != "tab1" || l1.Name != "flush" || !l1.ExpiresAt.Equal(T0.Add(30*time.Second)) {
		t.Fatalf("acquired %+v", l1)
	}
	if _, err := s.UpdateLease(bg, "flush", outbox.AcquireLease("tab2", T0.Add(time.Second), 30*time.Second, false)); !errors.Is(err, outbox.ErrLeaseHeld) {
		t.Fatalf("acquire of a held lease: %v", err)
	}
	cur, found, err := s.GetLease(bg, "flush")
	if !found || err != nil || cur.Owner != "tab1" || cur.Token != 1 {
		t.Fatalf("lease changed: %+v", cur)
	}
	r, err := s.UpdateLease(bg, "flush", outbox.RenewLease(l1, T0.Add(10*time.Second), 30*time.Second))
	if err != nil || !r.ExpiresAt.Equal(T0.Add(40*time.Second)) || r.Token != 1 {
		t.Fatalf("renew %+v %v", r, err)
	}
	if _, err := s.UpdateLease(bg, "flush", outbox.ReleaseLease(l1, T0.Add(11*time.Second))); err != nil {
		t.Fatal(err)
	}
	l2 := acquire(t, s, "tab2", T0.Add(12*time.Second), false)
	if l2.Token != 2 || l2.Owner != "tab2" {
		t.Fatalf("after release %+v", l2)
	}
	if _, err := s.UpdateLease(bg, "flush", outbox.RenewLease(l1, T0.Add(13*time.Second), time.Minute)); !errors.Is(err, outbox.ErrStaleOwner) {
		t.Fatalf("stale renew: %v", err)
	}
	if _, err := s.UpdateLease(bg, "flush", outbox.ReleaseLease(l1, T0.Add(13*time.Second))); !errors.Is(err, outbox.ErrStaleOwner) {
		t.Fatalf("stale release: %v", err)
	}
	cur, _, _ = s.GetLease(bg, "flush")
	if cur.Owner != "tab2" || cur.Token != 2 || !cur.ExpiresAt.Equal(l2.ExpiresAt) {
		t.Fatalf("stale owner changed the lease: %+v", cur)
	}
	l3 := acquire(t, s, "tab1", T0.Add(13*time.Second), true)
	if l3.Token != 3 {
		t.Fatalf("steal %+v", l3)
	}
	if _, found, _ := s.GetLease(bg, "other"); found {
		t.Fatal("leases are per name")
	}
}

func testMeta(t *testing.T, s outbox.Store) {
	m, err := s.UpdateMeta(bg, func(*outbox.Meta) error { return nil })
	if err != nil || m.Paused || len(m.AuthPaused) != 0 || m.LastError != nil {
		t.Fatalf("fresh meta %+v %v", m, err)
	}
	m, err = s.UpdateMeta(bg, func(m *outbox.Meta) error {
		m.Paused = true
		m.AuthPaused = append(m.AuthPaused, "alice", "bob")
		m.LastFlushAt = T0
		m.LastError = &outbox.ErrorInfo{Code: "network", Message: "offline", At: T0}
		return nil
	})
	if err != nil || !m.Paused {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, err := s.UpdateMeta(bg, func(m *outbox.Meta) error { m.Paused = false; m.AuthPaused = nil; return boom }); !errors.Is(err, boom) {
		t.Fatalf("got %v", err)
	}
	got, err := s.UpdateMeta(bg, func(*outbox.Meta) error { return nil })
	if err != nil || !got.Paused || len(got.AuthPaused) != 2 || got.AuthPaused[1] != "bob" || !got.LastFlushAt.Equal(T0) ||
		got.LastError == nil || got.LastError.Message != "offline" {
		t.Fatalf("meta %+v %v", got, err)
	}
	p, _ := s.Status(bg)
	if !p.Paused || len(p.AuthPaused) != 2 {
		t.Fatalf("status meta %+v", p.Meta)
	}
}

func testRoundTrip(t *testing.T, s outbox.Store) {
	r := NewRecord("full", "alice", "comment", "ok", "n1", []byte{0, 1, 2, 255})
	r.DependencyIDs = []string{"d1", "d2"}
	r.AuthGeneration = 1<<53 - 1
	r.TenantID = "t1"
	stored := enqueue(t, s, r, 0).Record
	same(t, stored, get(t, s, "full"))
	l := acquire(t, s, "tab1", T0, true)
	claim(t, s, l, "alice", T0, 1)
	transition(t, s, l, "full", func(r outbox.Record) (outbox.Record, error) { return outbox.MarkSending(r, l, T0) })
	d := transition(t, s, l, "full", func(r outbox.Record) (outbox.Record, error) {
		return outbox.Retry(r, l, T0, T0.Add(time.Hour), outbox.ErrorInfo{Code: "http_500", Message: "x", Status: 500})
	})
	same(t, d, get(t, s, "full"))
	if rs := list(t, s, outbox.Filter{}); len(rs) != 1 {
		t.Fatalf("list %s", ids(rs))
	} else {
		same(t, d, rs[0])
	}
}

// testFlush runs the real flusher over the store against an in-Go receiver
// with idempotency: every record acked, each applied once.
func testFlush(t *testing.T, s outbox.Store, n int) {
	if n <= 0 {
		n = 200
	}
	var mu sync.Mutex
	applied := map[string]int{}
	server := outbox.TransportFunc(func(_ context.Context, req outbox.Request) (outbox.Response, error) {
		key, err := wire.ParseIdempotencyKey(req.Header.Get(wire.HeaderIdempotencyKey))
		if err != nil {
			return outbox.Response{Status: 400}, nil
		}
		mu.Lock()
		defer mu.Unlock()
		applied[key]++
		if applied[key] > 1 {
			return outbox.Response{Status: 200, Header: outbox.Header{wire.HeaderReplayed: "true"}}, nil
		}
		return outbox.Response{Status: 201, Body: []byte(`{"ok":true}`)}, nil
	})
	ob, err := outbox.New(outbox.Config{Name: "conformance", Store: s, Transport: server, Policies: policies,
		BatchSize: 50, MaxFlushDuration: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ob.Login(context.Background(), outbox.Session{UserID: "alice", TenantID: "t1"})
	for i := 0; i < n; i++ {
		if _, err := ob.Enqueue(bg, outbox.Op{OperationType: "comment", EntityType: "note", EntityID: "n" + strconv.Itoa(i%8), Payload: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
	}
	lease, err := ob.Acquire(bg, "tab1", true)
	if err != nil {
		t.Fatal(err)
	}
	lease.Resource, lease.FenceToken = "outbox:conformance", lease.Token
	rep, err := ob.Flush(bg, lease)
	if err != nil || rep.Acked != n {
		t.Fatalf("flush: %+v %v", rep, err)
	}
	st, err := ob.Status(bg)
	if err != nil || st.Acked != n || st.Pending+st.Sending+st.Failed != 0 {
		t.Fatalf("status %+v %v", st, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(applied) != n {
		t.Fatalf("server applied %d distinct keys, want %d", len(applied), n)
	}
	for k, c := range applied {
		if c != 1 {
			t.Fatalf("key %s sent %d times", k, c)
		}
	}
}

func testCorrupt(t *testing.T, s outbox.Store, opts Options) {
	enqueue(t, s, NewRecord("a", "alice", "comment", "", "n1", nil), 0)
	opts.InjectCorrupt(t, s, "bad")
	enqueue(t, s, NewRecord("b", "alice", "comment", "", "n1", nil), 0)
	if rs := list(t, s, outbox.Filter{}); ids(rs) != "a,b" {
		t.Fatalf("list %s", ids(rs))
	}
	if rs := list(t, s, outbox.Filter{UserID: "alice"}); ids(rs) != "a,b" {
		t.Fatalf("list by user %s", ids(rs))
	}
	if _, err := s.Get(bg, "bad"); !errors.Is(err, opts.ErrCorrupt) {
		t.Fatalf("get of a corrupt record: %v", err)
	}
	if _, err := s.Amend(bg, "bad", func(*outbox.Record) error { return nil }); err == nil {
		t.Fatal("amend of a corrupt record succeeded")
	}
	if p, err := s.Status(bg); err != nil || p.Pending != 2 {
		t.Fatalf("status %+v %v", p, err)
	}
	l := acquire(t, s, "tab1", T0, true)
	if got := claim(t, s, l, "alice", T0, 10); ids(got) != "a,b" {
		t.Fatalf("claim %s", ids(got))
	}
	if n, err := s.Delete(bg, outbox.Filter{}); n != 2 || err != nil {
		t.Fatalf("delete %d %v", n, err)
	}
	// The corrupt value is left for a human; it was never rewritten.
	if _, err := s.Get(bg, "bad"); !errors.Is(err, opts.ErrCorrupt) {
		t.Fatalf("corrupt record after delete: %v", err)
	}
}

// Update changes one record under lease through UpdateBatch and returns
// it, with the batch's error or the record's.
func Update(s outbox.Store, lease outbox.Lease, id string, fn func(*outbox.Record) error) (outbox.Record, error) {
	out, err := s.UpdateBatch(bg, lease, []outbox.RecordUpdate{{ID: id, Fn: fn}})
	if err != nil {
		return outbox.Record{}, err
	}
	return out[0].Record, out[0].Err
}

// testClaimLongQueue drains a long, mixed queue batch by batch. Every claim
// must pick exactly what PlanClaim picks over the whole queue (a store may
// read less of it, e.g. a prefix in seq order, but never decide otherwise):
// two users, entities blocked by a conflict, by a backoff and by an
// in-flight record whose lease expired, dependencies on records far behind
// and far ahead, on acked and on absent records, and records of a newer
// schema.
func testClaimLongQueue(t *testing.T, s outbox.Store) {
	const n = 90
	id := func(i int) string { return "q" + strconv.Itoa(100+i) }
	for i := 0; i < n; i++ {
		user := "alice"
		if i%7 == 3 {
			user = "bob"
		}
		r := NewRecord(id(i), user, "comment", "", "e"+strconv.Itoa(i%11), nil)
		switch {
		case i%13 == 5:
			r.DependencyIDs = []string{id(i + 40)} // far ahead (or absent past the end)
		case i%17 == 9:
			r.DependencyIDs = []string{id(i - 30), "absent"}
		}
		if i%23 == 22 {
			r.PayloadSchemaVersion = 2
		}
		enqueue(t, s, r, 0)
	}
	old := acquire(t, s, "dead", T0, true)
	for _, r := range claim(t, s, old, "alice", T0, 3) { // an owner that dies mid-send
		transition(t, s, old, r.ID, func(r outbox.Record) (outbox.Record, error) { return outbox.MarkSending(r, old, T0) })
	}
	if got, err := s.Claim(bg, outbox.ClaimRequest{Lease: old, Now: T0, Limit: 2, LeaseTTL: 30 * time.Second, UserID: "alice", TenantID: "t1", Schema: outbox.SchemaGate{Version: 1}}); err != nil || len(got) != 2 {
		t.Fatalf("a plan whose records are never taken: %v %s", err, ids(got)) // and that stays harmless
	}
	l := acquire(t, s, "tab", T0.Add(time.Second), true)
	now := T0.Add(time.Minute) // past the dead owner's lease
	batch := 0
	for ; batch < 100; batch++ {
		var live []outbox.Record
		for _, r := range list(t, s, outbox.Filter{}) {
			if r.Status != outbox.StatusAcked {
				live = append(live, r)
			}
		}
		req := outbox.ClaimRequest{Lease: l, Now: now, Limit: 7, LeaseTTL: 30 * time.Second, UserID: "alice", TenantID: "t1", Schema: outbox.SchemaGate{Version: 1}}
		want := outbox.PlanClaim(live, req)
		got, err := s.Claim(bg, req)
		if err != nil {
			t.Fatalf("claim %d: %v", batch, err)
		}
		if ids(got) != ids(want.Claimed) {
			t.Fatalf("claim %d: got %s, PlanClaim over the whole queue %s", batch, ids(got), ids(want.Claimed))
		}
		if len(got) == 0 {
			break
		}
		got = take(t, s, l, now, got, func(r outbox.Record) (outbox.Record, error) {
			return outbox.Charge(r, l, now, 30*time.Second, time.Time{})
		})
		for i, r := range got {
			switch {
			case batch == 1 && i == 0:
				transition(t, s, l, r.ID, func(r outbox.Record) (outbox.Record, error) {
					return outbox.MarkConflict(r, l, now, outbox.ErrorInfo{Code: "http_409"})
				})
			case batch == 2 && i == 1:
				transition(t, s, l, r.ID, func(r outbox.Record) (outbox.Record, error) {
					return outbox.Retry(r, l, now, now.Add(time.Hour), outbox.ErrorInfo{Code: "http_503"})
				})
			default:
				transition(t, s, l, r.ID, func(r outbox.Record) (outbox.Record, error) {
					return outbox.Ack(r, l, now, outbox.StoredResponse{Status: 200})
				})
			}
		}
	}
	if batch < 5 {
		t.Fatalf("the queue drained in %d batches: the case did not exercise long queues", batch)
	}
}
