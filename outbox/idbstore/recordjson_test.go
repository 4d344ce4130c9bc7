package idbstore

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox/queue"
)

func TestFreshRecordJSON(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	rec := queue.Record{
		ID: "id-1", OperationKey: "k\"ey\\\n\x00", IdempotencyKey: "idem", EntityType: "note", EntityID: "é-1",
		OperationType: "put-note", PayloadRef: "", PayloadHash: "abc", PayloadSchemaVersion: 2,
		Status: queue.StatusPending, MaxAttempts: 10, NextAttemptAt: now, CreatedAt: now, UpdatedAt: now.Add(time.Millisecond),
		DependencyIDs: []string{"a", "b\tc"}, UserID: "u", TenantID: "t", AuthGeneration: 1 << 54,
		LeaseToken: 7, Seq: 0,
	}
	var got map[string]any
	b := appendRecordJSON(nil, &rec, false)
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	want := map[string]any{
		"v": 1.0, "id": "id-1", "operationKey": "k\"ey\\\n\x00", "idempotencyKey": "idem", "entityType": "note",
		"entityId": "é-1", "operationType": "put-note", "payloadHash": "abc", "payloadSchemaVersion": 2.0,
		"status": "pending", "maxAttempts": 10.0, "nextAttemptAt": 1_700_000_000_123.0,
		"createdAt": 1_700_000_000_123.0, "updatedAt": 1_700_000_000_124.0,
		"dependencyIds": []any{"a", "b\tc"}, "userId": "u", "tenantId": "t", "authGeneration": float64(uint64(1) << 54),
		"leaseToken": 7.0,
		fieldLive:    1.0, fieldEntity: rec.EntityKey(), fieldOpKey: []any{"u", "k\"ey\\\n\x00"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}

	// Settled and acked: no derived index fields; empty strings and zero
	// numbers omitted; id, status and userId always present.
	acked := queue.Record{ID: "x", Status: queue.StatusAcked, UserID: ""}
	got = nil
	require.NoError(t, json.Unmarshal(appendRecordJSON(nil, &acked, false), &got))
	want = map[string]any{"v": 1.0, "id": "x", "status": "acked", "userId": ""}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
}

// A rewrite writes every field, zero values included, and leaves "v" and a
// zero "seq" to the caller (encodeRecord).
func TestRewriteRecordJSON(t *testing.T) {
	rec := queue.Record{ID: "x", Status: queue.StatusAcked, UserID: "u"}
	var got map[string]any
	b := appendRecordJSON(nil, &rec, true)
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	want := map[string]any{
		"id": "x", "operationKey": "", "idempotencyKey": "", "entityType": "", "entityId": "",
		"operationType": "", "payloadRef": "", "payloadHash": "", "payloadSchemaVersion": 0.0,
		"status": "acked", "attempts": 0.0, "sends": 0.0, "maxAttempts": 0.0, "nextAttemptAt": nil,
		"leaseOwner": "", "leaseToken": 0.0, "leaseExpiresAt": nil, "dependencyIds": []any{},
		"createdAt": nil, "updatedAt": nil, "ackedAt": nil, "userId": "u", "tenantId": "", "authGeneration": 0.0,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	rec.Seq, rec.Status, rec.OperationKey = 9, queue.StatusPending, "k"
	got = nil
	require.NoError(t, json.Unmarshal(appendRecordJSON(nil, &rec, true), &got))
	if got["seq"] != 9.0 || got[fieldLive] != 1.0 || got[fieldEntity] != rec.EntityKey() || len(got[fieldOpKey].([]any)) != 2 {
		t.Fatalf("seq or derived fields missing: %v", got)
	}
}
