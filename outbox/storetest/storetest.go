// Package storetest is the conformance suite of outbox.Store: every method's
// contract as memstore.Store (the executable specification) implements it.
// It runs natively against memstore.Store and in Chromium against the IndexedDB
// store, so the two cannot drift.
package storetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
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

var policies = map[string]queue.Policy{
	"comment": {Dedupe: queue.Append},
	"title":   {Dedupe: queue.ReplaceLatest},
	"tags": {Dedupe: queue.Merge, Merge: func(a, b []byte) ([]byte, error) {
		return append(append(append([]byte{}, a...), ','), b...), nil
	}},
	"star": {Dedupe: queue.DropIfExists},
}

// NewRecord returns a valid record to enqueue.
func NewRecord(id, user, opType, opKey, entity string, payload []byte) queue.Record {
	return queue.Record{
		ID: id, IdempotencyKey: "key-" + id, OperationType: opType, OperationKey: opKey,
		EntityType: "note", EntityID: entity, Payload: payload, PayloadSchemaVersion: 1,
		Status: queue.StatusPending, MaxAttempts: 3, NextAttemptAt: T0,
		CreatedAt: T0, UpdatedAt: T0, UserID: user, TenantID: "t1", AuthGeneration: 1,
	}
}

func enqueue(t *testing.T, s outbox.Store, r queue.Record, inline int) queue.EnqueueResult {
	t.Helper()
	res, err := s.Enqueue(bg, queue.EnqueueRequest{Record: r, Policy: policies[r.OperationType], InlineLimit: inline})
	require.NoError(t, err, "enqueue %s", r.ID)
	return res
}

func get(t *testing.T, s outbox.Store, id string) queue.Record {
	t.Helper()
	r, err := s.Get(bg, id)
	require.NoError(t, err, "get %s", id)
	return r
}

func list(t *testing.T, s outbox.Store, f outbox.Filter) []queue.Record {
	t.Helper()
	rs, err := s.List(bg, f)
	require.NoError(t, err, "list")
	return rs
}

func ids(rs []queue.Record) string {
	out := ""
	for i, r := range rs {
		if i > 0 {
			out += ","
		}
		out += r.ID
	}
	return out
}

func acquire(t *testing.T, s outbox.Store, owner string, now time.Time, steal bool) queue.Lease {
	t.Helper()
	l, err := s.UpdateLease(bg, "flush", queue.AcquireLease(owner, now, 30*time.Second, steal))
	require.NoError(t, err, "acquire %s", owner)
	return l
}

// claim plans a batch with Store.Claim, then takes every planned record
// into leased under l (a Take update running the Claim transition), as a
// caller that sends them does: the records it returns are the taken ones,
// as stored.
func claim(t *testing.T, s outbox.Store, l queue.Lease, user string, now time.Time, limit int) []queue.Record {
	t.Helper()
	rs, err := s.Claim(bg, queue.ClaimRequest{Lease: l, Now: now, Limit: limit, LeaseTTL: 30 * time.Second, UserID: user, TenantID: "t1", Schema: queue.SchemaGate{Version: 1}})
	require.NoError(t, err, "claim")
	return take(t, s, l, now, rs, func(r queue.Record) (queue.Record, error) { return queue.Claim(r, l, now, 30*time.Second) })
}

// take applies tr to every record of rs as Take updates of one UpdateBatch
// under l, and returns the records as written.
func take(t *testing.T, s outbox.Store, l queue.Lease, now time.Time, rs []queue.Record, tr func(queue.Record) (queue.Record, error)) []queue.Record {
	t.Helper()
	if len(rs) == 0 {
		return rs
	}
	ups := make([]outbox.RecordUpdate, len(rs))
	for i := range rs {
		ups[i] = outbox.RecordUpdate{ID: rs[i].ID, Take: true, Fn: updateFn(tr)}
	}
	res, err := s.UpdateBatch(bg, l, ups)
	require.NoError(t, err, "take")
	out := make([]queue.Record, len(res))
	for i, u := range res {
		if u.Err != nil {
			t.Fatalf("take %s: %v", rs[i].ID, u.Err)
		}
		out[i] = u.Record
	}
	return out
}

func transition(t *testing.T, s outbox.Store, l queue.Lease, id string, tr func(queue.Record) (queue.Record, error)) queue.Record {
	t.Helper()
	r, err := Update(s, l, id, func(r *queue.Record) error {
		n, err := tr(*r)
		if err != nil {
			return err
		}
		*r = n
		return nil
	})
	require.NoError(t, err, "update %s", id)
	return r
}

// SameRecord reports the first difference between two records, comparing
// times at millisecond precision; "" when they are equal.
func SameRecord(a, b queue.Record) string {
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
	errEq := func(x, y *queue.ErrorInfo) bool {
		if x == nil || y == nil {
			return x == y
		}
		return x.Code == y.Code && x.Message == y.Message && x.Status == y.Status && ms(x.At) == ms(y.At)
	}
	respEq := func(x, y *queue.StoredResponse) bool {
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

func same(t *testing.T, want, got queue.Record) {
	t.Helper()
	if d := SameRecord(want, got); d != "" {
		t.Fatalf("records differ in %s:\nwant %+v\ngot  %+v", d, want, got)
	}
}

// Update changes one record under lease through UpdateBatch and returns
// it, with the batch's error or the record's.
func Update(s outbox.Store, lease queue.Lease, id string, fn func(*queue.Record) error) (queue.Record, error) {
	out, err := s.UpdateBatch(bg, lease, []outbox.RecordUpdate{{ID: id, Fn: fn}})
	if err != nil {
		return queue.Record{}, err
	}
	return out[0].Record, out[0].Err
}
