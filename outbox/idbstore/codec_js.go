//go:build js && wasm

package idbstore

import (
	"math"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// Records, leases and metadata are stored as plain JavaScript objects, so
// the queue can be inspected in DevTools and read by other code, and every
// field is a key IndexedDB can index. They are encoded and decoded by hand:
// encoding/json and reflect would cost every user download size.
//
// Numbers: uint64 fields (seq, tokens, auth generation) are JavaScript
// numbers, exact up to 2^53-1 (wire.MaxToken bounds fencing tokens the same
// way). Times are Unix milliseconds like Date.now(), null when zero; the
// sub-millisecond part is dropped, which is harmless because every
// comparison is against a wall clock.
//
// Compatibility: every object carries "v", the encoding version. Writes
// start from a copy of the stored object and overwrite only the fields this
// build knows, so fields added by a newer build survive an update by an
// older one (additive evolution; a breaking change bumps the database
// version and migrates in the upgrade). A value that does not decode is a
// *CorruptRecordError and is never rewritten.

// recordEncoding, the "v" this build writes, is in recordjson.go.

var (
	jsObject     = js.Global().Get("Object")
	jsArray      = js.Global().Get("Array")
	jsUint8Array = js.Global().Get("Uint8Array")
	jsNull       = js.Null()
)

// CorruptRecordError reports a stored value that cannot be decoded: written
// by foreign code, by a broken build, or damaged. It matches
// ErrCorruptRecord. Listings skip such records (and count them, see
// Store.Corrupt); Get returns the error.
type CorruptRecordError struct {
	Store string // object store
	Key   string // primary key, if it is a string
	Field string
	Why   string
}

func (e *CorruptRecordError) Error() string {
	s := "outbox: corrupt " + e.Store + " value"
	if e.Key != "" {
		s += " " + quote(e.Key)
	}
	if e.Field != "" {
		s += ": field " + e.Field
	}
	return s + ": " + e.Why
}

// Is makes errors.Is(err, ErrCorruptRecord) true.
func (e *CorruptRecordError) Is(target error) bool { return target == outbox.ErrCorruptRecord }

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return `"` + s + `"`
}

// reader decodes one object defensively: a missing optional field is its
// zero value, a field of the wrong type is an error, and nothing panics.
type reader struct {
	v     js.Value
	store string
	key   string
	err   *CorruptRecordError
}

func newReader(store string, v js.Value) *reader {
	r := &reader{v: v, store: store}
	if v.Type() != js.TypeObject || v.InstanceOf(jsArray) || v.InstanceOf(jsUint8Array) {
		r.err = &CorruptRecordError{Store: store, Why: "not an object"}
	}
	return r
}

func (r *reader) fail(field, why string) {
	if r.err == nil {
		r.err = &CorruptRecordError{Store: r.store, Key: r.key, Field: field, Why: why}
	}
}

func (r *reader) get(field string) (js.Value, bool) {
	if r.err != nil {
		return js.Undefined(), false
	}
	p := r.v.Get(field)
	if p.IsUndefined() || p.IsNull() {
		return p, false
	}
	return p, true
}

func (r *reader) str(field string) string {
	p, ok := r.get(field)
	if !ok {
		return ""
	}
	if p.Type() != js.TypeString {
		r.fail(field, "not a string")
		return ""
	}
	return p.String()
}

func (r *reader) boolean(field string) bool {
	p, ok := r.get(field)
	if !ok {
		return false
	}
	if p.Type() != js.TypeBoolean {
		r.fail(field, "not a boolean")
		return false
	}
	return p.Bool()
}

// maxExact is the largest integer a JavaScript number holds exactly.
const maxExact = 1<<53 - 1

// The values a stored number may hold, by kind of field (both record
// readers, decodeRecordSlow and the packed one, judge by these): an
// integer, a non-negative one, and a time in milliseconds within
// JavaScript's Date range. NaN and infinities are none of them.
func intOK(f float64) bool  { return f >= -maxExact && f <= maxExact && f == math.Trunc(f) }
func uintOK(f float64) bool { return f >= 0 && f <= maxExact && f == math.Trunc(f) }
func timeOK(f float64) bool { return f == math.Trunc(f) && math.Abs(f) <= 8.64e15 }

// num reads number field, which ok must accept (else it fails as what).
func (r *reader) num(field string, ok func(float64) bool, what string) (float64, bool) {
	p, present := r.get(field)
	if !present {
		return 0, false
	}
	if p.Type() != js.TypeNumber {
		r.fail(field, "not a number")
		return 0, false
	}
	f := p.Float()
	if !ok(f) {
		r.fail(field, what)
		return 0, false
	}
	return f, true
}

func (r *reader) uint(field string) uint64 {
	f, _ := r.num(field, uintOK, "not an integer in 0..2^53-1")
	return uint64(f)
}

func (r *reader) int(field string) int {
	f, _ := r.num(field, intOK, "not an integer")
	return int(f)
}

func (r *reader) time(field string) time.Time {
	f, ok := r.num(field, timeOK, "not a time in milliseconds")
	if !ok {
		return time.Time{}
	}
	return time.UnixMilli(int64(f)).UTC()
}

func (r *reader) bytes(field string) []byte {
	p, ok := r.get(field)
	if !ok {
		return nil
	}
	return r.bytesOf(field, p)
}

func (r *reader) bytesOf(field string, p js.Value) []byte {
	if p.Type() != js.TypeObject || !p.InstanceOf(jsUint8Array) {
		r.fail(field, "not a Uint8Array")
		return nil
	}
	n := p.Get("length").Int()
	if n == 0 {
		return nil
	}
	b := make([]byte, n)
	js.CopyBytesToGo(b, p)
	return b
}

func (r *reader) strs(field string) []string {
	p, ok := r.get(field)
	if !ok {
		return nil
	}
	if p.Type() != js.TypeObject || !p.InstanceOf(jsArray) {
		r.fail(field, "not an array")
		return nil
	}
	n := p.Length()
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		e := p.Index(i)
		if e.Type() != js.TypeString {
			r.fail(field, "element not a string")
			return nil
		}
		out[i] = e.String()
	}
	return out
}

func (r *reader) sub(field string) (*reader, bool) {
	p, ok := r.get(field)
	if !ok {
		return nil, false
	}
	s := newReader(r.store, p)
	s.key = r.key
	if s.err != nil {
		r.fail(field, "not an object")
		return nil, false
	}
	return s, true
}

func (r *reader) errorInfo(field string) *queue.ErrorInfo {
	s, ok := r.sub(field)
	if !ok {
		return nil
	}
	e := &queue.ErrorInfo{Code: s.str("code"), Message: s.str("message"), Status: s.int("status"), At: s.time("at")}
	if s.err != nil {
		s.err.Field = field + "." + s.err.Field
		r.err = s.err
		return nil
	}
	return e
}

func (r *reader) version() int {
	p, ok := r.get("v")
	if !ok {
		r.fail("v", "missing encoding version")
		return 0
	}
	v := r.int("v")
	if r.err == nil && v < 1 {
		_ = p
		r.fail("v", "encoding version below 1")
	}
	return v
}

func (r *reader) done() error {
	if r.err != nil {
		return r.err
	}
	return nil
}

// decodeRecordSlow decodes a stored record field by field (decodeRecord
// tries the packed read first). Required: v >= 1, a non-empty id and
// status, seq, userId and idempotencyKey strings. A newer v decodes as long
// as the fields this build knows keep their types.
func decodeRecordSlow(v js.Value) (queue.Record, error) {
	r := newReader(storeRecords, v)
	if r.err == nil {
		if id := v.Get("id"); id.Type() == js.TypeString {
			r.key = id.String()
		}
	}
	r.version()
	var rec queue.Record
	rec.ID = r.str("id")
	if r.err == nil && rec.ID == "" {
		r.fail("id", "missing")
	}
	rec.OperationKey = r.str("operationKey")
	rec.IdempotencyKey = r.str("idempotencyKey")
	rec.EntityType = r.str("entityType")
	rec.EntityID = r.str("entityId")
	rec.OperationType = r.str("operationType")
	rec.Payload = r.bytes("payload")
	rec.PayloadRef = r.str("payloadRef")
	rec.PayloadHash = r.str("payloadHash")
	rec.PayloadSchemaVersion = r.int("payloadSchemaVersion")
	rec.Status = queue.Status(r.str("status"))
	if r.err == nil && rec.Status == "" {
		r.fail("status", "missing")
	}
	rec.Attempts = r.int("attempts")
	rec.Sends = r.int("sends")
	rec.MaxAttempts = r.int("maxAttempts")
	rec.NextAttemptAt = r.time("nextAttemptAt")
	rec.LastError = r.errorInfo("lastError")
	rec.LeaseOwner = r.str("leaseOwner")
	rec.LeaseToken = r.uint("leaseToken")
	rec.LeaseExpiresAt = r.time("leaseExpiresAt")
	rec.DependencyIDs = r.strs("dependencyIds")
	if _, ok := r.get("seq"); !ok {
		r.fail("seq", "missing")
	}
	rec.Seq = r.uint("seq")
	rec.CreatedAt = r.time("createdAt")
	rec.UpdatedAt = r.time("updatedAt")
	rec.AckedAt = r.time("ackedAt")
	if s, ok := r.sub("response"); ok {
		resp := &queue.StoredResponse{Status: s.int("status"), Body: s.bytes("body"), Replayed: s.boolean("replayed")}
		if s.err != nil {
			s.err.Field = "response." + s.err.Field
			r.err = s.err
		}
		rec.Response = resp
	}
	if p, ok := r.get("userId"); !ok || p.Type() != js.TypeString {
		r.fail("userId", "missing")
	}
	rec.UserID = r.str("userId")
	rec.TenantID = r.str("tenantId")
	rec.AuthGeneration = r.uint("authGeneration")
	if err := r.done(); err != nil {
		return queue.Record{}, err
	}
	return rec, nil
}

// newObject returns a shallow copy of base (keeping fields a newer build
// added), or a new empty object.
func newObject(base js.Value) js.Value {
	if base.Type() == js.TypeObject {
		return jsObject.Call("assign", jsObject.New(), base)
	}
	return jsObject.New()
}

func setTime(o js.Value, field string, t time.Time) {
	if t.IsZero() {
		o.Set(field, jsNull)
		return
	}
	o.Set(field, float64(t.UnixMilli()))
}

func setBytes(o js.Value, field string, b []byte) {
	if b == nil {
		o.Set(field, jsNull)
		return
	}
	o.Set(field, jsglue.Bytes(b))
}

func setStrs(o js.Value, field string, xs []string) {
	a := jsArray.New(len(xs))
	for i, x := range xs {
		a.SetIndex(i, x)
	}
	o.Set(field, a)
}

func setUint(o js.Value, field string, n uint64) { o.Set(field, float64(n)) }

func encodeErrorInfo(e *queue.ErrorInfo) js.Value {
	if e == nil {
		return jsNull
	}
	o := jsObject.New()
	o.Set("code", e.Code)
	o.Set("message", e.Message)
	o.Set("status", e.Status)
	setTime(o, "at", e.At)
	return o
}

// The derived index fields (fieldLive, fieldOpKey, fieldEntity) are in
// recordjson.go.

// encodeRecord builds the stored object of rec on top of base (the stored
// object it replaces, or undefined). A new object omits zero-valued fields
// (decoding reads a missing field as its zero value), which saves a third of
// the JavaScript calls of an append; a rewrite sets every known field, so
// no stale value survives under a newer build's extra fields.
func encodeRecord(rec *queue.Record, base js.Value) js.Value {
	return encodeOver(rec, base, false)
}

// encodeOver is encodeRecord; payloadStored says base already holds
// rec.Payload (the update left the bytes as read), so its stored value is
// kept rather than copied again from Go: a charge or an ack rewrites a
// record's state, never its payload.
func encodeOver(rec *queue.Record, base js.Value, payloadStored bool) js.Value {
	if base.Type() != js.TypeObject {
		return encodeFreshRecord(rec)
	}
	// A rewrite: every field is written, zero values included, over a copy
	// of the stored object (which keeps fields a newer version added), the
	// scalars in one JSON.parse (appendRecordJSON).
	o := jsObject.Call("assign", jsObject.New(), base,
		jsJSON.Call("parse", string(appendRecordJSON(make([]byte, 0, 640), rec, true))))
	if v := o.Get("v"); v.Type() != js.TypeNumber || v.Float() < recordEncoding {
		o.Set("v", recordEncoding)
	}
	if !payloadStored {
		setBytes(o, "payload", rec.Payload)
	}
	o.Set("lastError", encodeErrorInfo(rec.LastError))
	o.Set("response", encodeResponse(rec.Response))
	if rec.Seq == 0 {
		o.Delete("seq") // an append: the key generator assigns it
	}
	// The derived index fields appendRecordJSON left out are gone.
	if rec.Status == queue.StatusAcked {
		o.Delete(fieldLive)
	}
	if rec.Status.Settled() {
		o.Delete(fieldEntity)
	}
	if rec.Status.Settled() || rec.OperationKey == "" {
		o.Delete(fieldOpKey)
	}
	return o
}

// encodeResponse is a stored response's object, or null.
func encodeResponse(r *queue.StoredResponse) js.Value {
	if r == nil {
		return jsNull
	}
	resp := jsObject.New()
	resp.Set("status", r.Status)
	setBytes(resp, "body", r.Body)
	resp.Set("replayed", r.Replayed)
	return resp
}

// encodeFreshRecord is encodeRecord of a record that replaces no stored
// object: the scalar fields in one JSON.parse (appendRecordJSON), then the
// bytes and nested objects.
func encodeFreshRecord(rec *queue.Record) js.Value {
	o := jsJSON.Call("parse", string(appendRecordJSON(make([]byte, 0, 512), rec, false)))
	if rec.Payload != nil {
		setBytes(o, "payload", rec.Payload)
	}
	if rec.LastError != nil {
		o.Set("lastError", encodeErrorInfo(rec.LastError))
	}
	if rec.Response != nil {
		o.Set("response", encodeResponse(rec.Response))
	}
	return o
}

var jsJSON = js.Global().Get("JSON")

func opKey(user, key string) js.Value {
	a := jsArray.New(2)
	a.SetIndex(0, user)
	a.SetIndex(1, key)
	return a
}

// encodeLease and decodeLease: the lease row, keyed by name.
func encodeLease(l queue.Lease, base js.Value) js.Value {
	o := newObject(base)
	o.Set("v", recordEncoding)
	o.Set("name", l.Name)
	o.Set("owner", l.Owner)
	setUint(o, "token", l.Token)
	setTime(o, "expiresAt", l.ExpiresAt)
	setTime(o, "updatedAt", l.UpdatedAt)
	o.Set("resource", l.Resource)
	setUint(o, "fenceToken", l.FenceToken)
	return o
}

func decodeLease(v js.Value) (queue.Lease, error) {
	r := newReader(storeLeases, v)
	l := queue.Lease{
		Name: r.str("name"), Owner: r.str("owner"), Token: r.uint("token"),
		ExpiresAt: r.time("expiresAt"), UpdatedAt: r.time("updatedAt"),
		Resource: r.str("resource"), FenceToken: r.uint("fenceToken"),
	}
	if err := r.done(); err != nil {
		return queue.Lease{}, err
	}
	return l, nil
}

func encodeMeta(m outbox.Meta, base js.Value) js.Value {
	o := newObject(base)
	o.Set("v", recordEncoding)
	o.Set("paused", m.Paused)
	setStrs(o, "authPaused", m.AuthPaused)
	setTime(o, "lastFlushAt", m.LastFlushAt)
	o.Set("lastError", encodeErrorInfo(m.LastError))
	o.Set("failure", encodeFailure(m.Failure))
	encodeMetaSession(o, &m)
	return o
}

func decodeMeta(v js.Value) (outbox.Meta, error) {
	r := newReader(storeMeta, v)
	m := outbox.Meta{Paused: r.boolean("paused"), AuthPaused: r.strs("authPaused"), LastFlushAt: r.time("lastFlushAt")}
	m.LastError = r.errorInfo("lastError")
	m.Failure = r.failure("failure")
	decodeMetaSession(r, &m)
	if err := r.done(); err != nil {
		return outbox.Meta{}, err
	}
	return m, nil
}
