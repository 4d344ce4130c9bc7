//go:build js && wasm

package idbstore

import (
	"encoding/binary"
	"math"
	"sync"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/outbox/queue"
)

// Reading a record field by field from Go costs about three calls across
// the wasm boundary per field (the property, its type, its text), and each
// object or string handed to Go becomes a reference with a finalizer: some
// eighty calls per record, the largest cost of a flush's transactions after
// IndexedDB itself (docs/outbox-notes.md). packRecord (pack.js) is a small
// JavaScript function that reads every field a record has, in JavaScript,
// into one buffer: the numbers as
// float64s, the strings as UTF-8 with their lengths. Go copies the buffer
// in one call and reads it natively; only the payload's and the response
// body's bytes are fetched apart.
//
// It judges nothing: it only packs values of the plain shapes this build
// writes (strings, finite numbers, booleans, Uint8Arrays, plain objects
// and arrays of strings, or null/undefined for absent). Anything else, or
// a record that does not fit the buffer, and unpackRecord's own checks
// failing (a number out of its field's range, a required field missing)
// send the record to decodeRecordSlow, which reads it field by field and
// reports the exact CorruptRecordError. Both give the same Record for
// every value packRecord takes (TestPackedDecodeAgrees). Without Function
// (a CSP without 'unsafe-eval') every record takes the slow path.

var (
	packOnce    sync.Once
	packFn      js.Value // packRecord; undefined without Function
	packScratch js.Value // the Uint8Array it fills
	packMu      sync.Mutex
	packBuf     []byte
)

// packer returns packRecord and its buffer (undefined without Function).
func packer() (js.Value, js.Value) {
	packOnce.Do(func() {
		defer func() { _ = recover() }() // a CSP refusing Function: the slow path
		mk := js.Global().Get("Function").New("return (" + packJS + ")").Invoke()
		pair := mk.Invoke(packScratchLen, packedNumbers, jsStrings(packNumbers[:]), jsStrings(packStrings[:]))
		packScratch, packFn = pair.Index(0), pair.Index(1)
		packBuf = make([]byte, packScratchLen)
	})
	return packFn, packScratch
}

func jsStrings(xs []string) js.Value {
	a := jsArray.New(len(xs))
	for i, x := range xs {
		a.SetIndex(i, x)
	}
	return a
}

// decodeRecord decodes a stored record: packed (see above) when it can,
// else field by field (decodeRecordSlow), which reports what is wrong.
func decodeRecord(v js.Value) (queue.Record, error) {
	if rec, ok := decodePacked(v); ok {
		return rec, nil
	}
	return decodeRecordSlow(v)
}

func decodePacked(v js.Value) (queue.Record, bool) {
	fn, scratch := packer()
	if fn.Type() != js.TypeFunction {
		return queue.Record{}, false
	}
	packMu.Lock()
	defer packMu.Unlock()
	n := fn.Invoke(v)
	if n.Type() != js.TypeNumber {
		return queue.Record{}, false
	}
	size := n.Int()
	if size < 8*packedNumbers || size > len(packBuf) {
		return queue.Record{}, false
	}
	buf := packBuf[:size]
	js.CopyBytesToGo(buf, scratch)
	u := unpacker{b: buf, off: 8 * packedNumbers}
	return u.record(v)
}

// unpacker reads a packed record, applying decodeRecordSlow's rules to its
// numbers; ok false sends the record to the slow path.
type unpacker struct {
	b   []byte
	off int
	ok  bool
}

func (u *unpacker) num(i int) (float64, bool) {
	f := math.Float64frombits(binary.LittleEndian.Uint64(u.b[8*i:]))
	return f, !math.IsNaN(f)
}

func (u *unpacker) int(i int) int {
	f, ok := u.num(i)
	if !ok {
		return 0
	}
	if !intOK(f) {
		u.ok = false
	}
	return int(f)
}

func (u *unpacker) uint(i int) uint64 {
	f, ok := u.num(i)
	if !ok {
		return 0
	}
	if !uintOK(f) {
		u.ok = false
		return 0
	}
	return uint64(f)
}

func (u *unpacker) time(i int) time.Time {
	f, ok := u.num(i)
	if !ok {
		return time.Time{}
	}
	if !timeOK(f) {
		u.ok = false
		return time.Time{}
	}
	return time.UnixMilli(int64(f)).UTC()
}

// str reads the next string slot; present false for an absent one.
func (u *unpacker) str() (s string, present bool) {
	if u.off+4 > len(u.b) {
		u.ok = false
		return "", false
	}
	n := binary.LittleEndian.Uint32(u.b[u.off:])
	u.off += 4
	if n == math.MaxUint32 {
		return "", false
	}
	if int(n) > len(u.b)-u.off {
		u.ok = false
		return "", false
	}
	s = string(u.b[u.off : u.off+int(n)])
	u.off += int(n)
	return s, true
}

func (u *unpacker) s() string {
	s, _ := u.str()
	return s
}

// bytes copies the Uint8Array at field of o, of length n (slot i), when
// there is one.
func (u *unpacker) bytes(i int, o js.Value, field string) []byte {
	f, ok := u.num(i)
	if !ok || f == 0 {
		return nil
	}
	b := make([]byte, int(f))
	if js.CopyBytesToGo(b, o.Get(field)) != len(b) {
		u.ok = false
	}
	return b
}

func (u *unpacker) record(v js.Value) (queue.Record, bool) {
	u.ok = true
	var rec queue.Record
	if _, hasV := u.num(pV); !hasV || u.int(pV) < 1 {
		return queue.Record{}, false
	}
	rec.PayloadSchemaVersion = u.int(pSchema)
	rec.Attempts = u.int(pAttempts)
	rec.Sends = u.int(pSends)
	rec.MaxAttempts = u.int(pMaxAttempts)
	rec.NextAttemptAt = u.time(pNextAttemptAt)
	rec.LeaseToken = u.uint(pLeaseToken)
	rec.LeaseExpiresAt = u.time(pLeaseExpiresAt)
	if _, ok := u.num(pSeq); !ok {
		return queue.Record{}, false // missing: the slow path says so
	}
	rec.Seq = u.uint(pSeq)
	rec.CreatedAt = u.time(pCreatedAt)
	rec.UpdatedAt = u.time(pUpdatedAt)
	rec.AckedAt = u.time(pAckedAt)
	rec.AuthGeneration = u.uint(pAuthGeneration)

	rec.ID = u.s()
	rec.OperationKey = u.s()
	rec.IdempotencyKey = u.s()
	rec.EntityType = u.s()
	rec.EntityID = u.s()
	rec.OperationType = u.s()
	rec.PayloadRef = u.s()
	rec.PayloadHash = u.s()
	rec.Status = queue.Status(u.s())
	rec.LeaseOwner = u.s()
	user, hasUser := u.str()
	rec.UserID = user
	rec.TenantID = u.s()
	if rec.ID == "" || rec.Status == "" || !hasUser {
		return queue.Record{}, false
	}
	code, msg := u.s(), u.s()
	if _, ok := u.num(pLastError); ok {
		rec.LastError = &queue.ErrorInfo{Code: code, Message: msg, Status: u.int(pErrStatus), At: u.time(pErrAt)}
	}
	if nd, ok := u.num(pDeps); ok && nd > 0 {
		rec.DependencyIDs = make([]string, int(nd))
		for i := range rec.DependencyIDs {
			rec.DependencyIDs[i] = u.s()
		}
	}
	if !u.ok {
		return queue.Record{}, false
	}
	rec.Payload = u.bytes(pPayloadLen, v, "payload")
	if _, ok := u.num(pResponse); ok {
		resp := &queue.StoredResponse{Status: u.int(pRespStatus)}
		if b, ok := u.num(pRespReplayed); ok {
			resp.Replayed = b == 1
		}
		if _, ok := u.num(pRespBodyLen); ok {
			resp.Body = u.bytes(pRespBodyLen, v.Get("response"), "body")
		}
		rec.Response = resp
	}
	return rec, u.ok
}
