//go:build js && wasm

package idbstore

import (
	"reflect"
	"strings"
	"syscall/js"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox/queue"
)

// fullRecord has every field set, strings with quotes, NUL, control
// characters and non-ASCII.
func fullRecord() queue.Record {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	return queue.Record{
		ID: "id\"1", OperationKey: "key\\\x00\n", IdempotencyKey: "idem", EntityType: "note", EntityID: "é-1",
		OperationType: "put-note", Payload: []byte(`{"a":1}`), PayloadRef: "ref", PayloadHash: "abc",
		PayloadSchemaVersion: 2, Status: queue.StatusFailed, Attempts: 3, Sends: 4, MaxAttempts: 10,
		NextAttemptAt: at, LastError: &queue.ErrorInfo{Code: "http", Message: "x\ty", Status: 503, At: at},
		LeaseOwner: "o", LeaseToken: 9, LeaseExpiresAt: at, DependencyIDs: []string{"d1", "d\"2", "𝄞"}, Seq: 42,
		CreatedAt: at, UpdatedAt: at.Add(time.Millisecond), AckedAt: at.Add(2 * time.Millisecond),
		Response: &queue.StoredResponse{Status: 200, Body: []byte("ok"), Replayed: true},
		UserID:   "u", TenantID: "t", AuthGeneration: 5,
	}
}

// The packed read (decodePacked) and the field-by-field one
// (decodeRecordSlow) agree: on every plain record the packed one takes
// it and gives the same Record; on everything else it either gives way
// (the slow path then decides) or, where it takes the value, both accept
// it alike. It never accepts what the slow path calls corrupt.
func TestPackedDecodeAgrees(t *testing.T) {
	if fn, _ := packer(); fn.Type() != js.TypeFunction {
		t.Fatal("packRecord missing: this page allows Function")
	}
	full := fullRecord()
	minimal := queue.Record{ID: "m", Status: queue.StatusPending, Seq: 1, UserID: ""}
	eval := func(src string) js.Value {
		return js.Global().Get("Function").New("base", "return ("+src+")").Invoke(encodeRecord(&full, js.Undefined()))
	}
	// Records the packed read must take, with the Record they decode to.
	plain := []struct {
		name string
		v    js.Value
	}{
		{"full", encodeRecord(&full, js.Undefined())},
		{"full rewritten", encodeRecord(&full, encodeRecord(&full, js.Undefined()))},
		{"minimal", encodeRecord(&minimal, js.Undefined())},
		{"nulls", eval(`Object.assign({}, base, {lastError: null, response: null, payload: null, dependencyIds: null, tenantId: null, ackedAt: null})`)},
		{"empty arrays and bytes", eval(`Object.assign({}, base, {dependencyIds: [], payload: new Uint8Array(0), response: {status: 204}})`)},
		{"partial nested", eval(`Object.assign({}, base, {lastError: {code: "c"}, response: {body: new Uint8Array([1, 2])}})`)},
		{"minus zero and null proto", eval(`Object.assign(Object.create(null), base, {attempts: -0, nextAttemptAt: -0})`)},
		{"a newer build's fields", eval(`Object.assign({}, base, {v: 7, extra: {deep: [1]}, more: "x"})`)},
		{"lone surrogate", eval(`Object.assign({}, base, {entityId: "a\ud800b"})`)},
		{"negative int", eval(`Object.assign({}, base, {attempts: -3, createdAt: -5})`)},
	}
	for _, c := range plain {
		slow, err := decodeRecordSlow(c.v)
		require.NoError(t, err, "%s: the slow path refuses it", c.name)
		fast, ok := decodePacked(c.v)
		if !ok {
			t.Fatalf("%s: the packed read gave way on a plain record", c.name)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%s:\npacked %+v\nslow   %+v", c.name, fast, slow)
		}
	}
	if got, _ := decodePacked(encodeRecord(&full, js.Undefined())); !reflect.DeepEqual(got, full) {
		t.Fatalf("full record: %+v", got)
	}
	// Values the packed read must not accept unless the slow path does.
	odd := []string{
		`null`, `42`, `"s"`, `[1]`, `new Uint8Array(4)`, `new Date()`, `new Map()`,
		`({})`,
		`Object.assign({}, base, {v: 0})`, `Object.assign({}, base, {v: 1.5})`, `Object.assign({}, base, {v: "1"})`,
		`Object.assign({}, base, {v: undefined})`,
		`Object.assign({}, base, {id: ""})`, `Object.assign({}, base, {id: 7})`, `Object.assign({}, base, {status: null})`,
		`Object.assign({}, base, {seq: undefined})`, `Object.assign({}, base, {seq: -1})`, `Object.assign({}, base, {seq: 2**53})`,
		`Object.assign({}, base, {userId: undefined})`, `Object.assign({}, base, {userId: 5})`,
		`Object.assign({}, base, {attempts: 1.5})`, `Object.assign({}, base, {attempts: NaN})`, `Object.assign({}, base, {attempts: Infinity})`,
		`Object.assign({}, base, {attempts: "3"})`, `Object.assign({}, base, {leaseToken: -1})`,
		`Object.assign({}, base, {createdAt: 1e16})`, `Object.assign({}, base, {createdAt: 0.5})`, `Object.assign({}, base, {createdAt: new Date()})`,
		`Object.assign({}, base, {payload: "text"})`, `Object.assign({}, base, {payload: [1, 2]})`, `Object.assign({}, base, {payload: new ArrayBuffer(2)})`,
		`Object.assign({}, base, {dependencyIds: "d"})`, `Object.assign({}, base, {dependencyIds: ["a", 1]})`, `Object.assign({}, base, {dependencyIds: ["a", null]})`,
		`Object.assign({}, base, {dependencyIds: [, "a"]})`,
		`Object.assign({}, base, {lastError: "boom"})`, `Object.assign({}, base, {lastError: [1]})`, `Object.assign({}, base, {lastError: {status: "x"}})`,
		`Object.assign({}, base, {lastError: {at: 1.5}})`, `Object.assign({}, base, {lastError: new Date()})`,
		`Object.assign({}, base, {response: {replayed: "yes"}})`, `Object.assign({}, base, {response: {body: "b"}})`, `Object.assign({}, base, {response: {status: 2.5}})`,
		`Object.assign({}, base, {response: 5})`,
		`Object.assign({}, base, {tenantId: {}})`, `Object.assign({}, base, {operationKey: 1})`,
		`Object.assign({}, base, {payloadRef: "x".repeat(70000)})`,
	}
	for _, src := range odd {
		v := eval(src)
		slow, serr := decodeRecordSlow(v)
		fast, ok := decodePacked(v)
		if !ok {
			continue // the slow path decides
		}
		if serr != nil {
			t.Fatalf("%s: the packed read accepts what the slow path calls corrupt (%v)", src, serr)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%s:\npacked %+v\nslow   %+v", src, fast, slow)
		}
	}
	// A record too big for the buffer still decodes, through the slow path.
	big := full
	big.PayloadRef = strings.Repeat("r", 70000)
	if got, err := decodeRecord(encodeRecord(&big, js.Undefined())); err != nil || got.PayloadRef != big.PayloadRef {
		t.Fatalf("big record: %v", err)
	}
}
