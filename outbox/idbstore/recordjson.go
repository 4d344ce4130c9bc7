package idbstore

import (
	"strconv"
	"time"

	"github.com/tabfence/tabfence/outbox/queue"
)

// recordEncoding is the "v" this build writes (see idbcodec_js.go).
const recordEncoding = 1

// Derived index fields of a stored record. They exist only while they are
// meaningful, so the indexes over them are sparse: IndexedDB leaves a
// record out of an index whose key path is missing.
const (
	fieldLive   = "_live"   // 1 while not acked (entries of equal keys are in seq order)
	fieldOpKey  = "_opKey"  // [userId, operationKey], while unsettled
	fieldEntity = "_entity" // EntityKey(), while unsettled
)

// appendRecordJSON appends, as one JSON object, the scalar fields of a
// record's stored form: everything but payload, lastError and response,
// which the caller sets on the parsed object (bytes and nested objects).
// The browser build parses it with JSON.parse: one string crosses from Go to
// JavaScript instead of one per field, and each of those is a reference the
// Go runtime tracks with a finalizer (syscall/js), the main cost of
// encoding a record.
//
// A fresh record (rewrite false: it replaces no stored object) gets "v" and
// omits zero values. A rewrite, which the caller assigns over a copy of the
// stored object, writes every field, zero values included (null for a zero
// time, [] for no dependencies), except "v" (the caller keeps a newer one)
// and a zero "seq"; the caller deletes the derived index fields it leaves
// out.
//
// Strings go out as their UTF-8 bytes with only '"', '\\' and control
// characters escaped, so JSON.parse yields what syscall/js would have made
// of the Go string (invalid UTF-8 included: TextDecoder replaces it either
// way, and every escape is ASCII).
func appendRecordJSON(b []byte, rec *queue.Record, rewrite bool) []byte {
	if rewrite {
		b = append(b, `{"id":`...)
		b = appendJSONString(b, rec.ID)
	} else {
		b = append(b, `{"v":`...)
		b = strconv.AppendInt(b, recordEncoding, 10)
		b = appendJSONField(b, "id", rec.ID, true)
	}
	all := rewrite // write zero values too
	b = appendJSONField(b, "operationKey", rec.OperationKey, all)
	b = appendJSONField(b, "idempotencyKey", rec.IdempotencyKey, all)
	b = appendJSONField(b, "entityType", rec.EntityType, all)
	b = appendJSONField(b, "entityId", rec.EntityID, all)
	b = appendJSONField(b, "operationType", rec.OperationType, all)
	b = appendJSONField(b, "payloadRef", rec.PayloadRef, all)
	b = appendJSONField(b, "payloadHash", rec.PayloadHash, all)
	b = appendJSONInt(b, "payloadSchemaVersion", int64(rec.PayloadSchemaVersion), all)
	b = appendJSONField(b, "status", string(rec.Status), true)
	b = appendJSONInt(b, "attempts", int64(rec.Attempts), all)
	b = appendJSONInt(b, "sends", int64(rec.Sends), all)
	b = appendJSONInt(b, "maxAttempts", int64(rec.MaxAttempts), all)
	b = appendJSONTime(b, "nextAttemptAt", rec.NextAttemptAt, all)
	b = appendJSONField(b, "leaseOwner", rec.LeaseOwner, all)
	b = appendJSONUint(b, "leaseToken", rec.LeaseToken, all)
	b = appendJSONTime(b, "leaseExpiresAt", rec.LeaseExpiresAt, all)
	if len(rec.DependencyIDs) > 0 || all {
		b = append(b, `,"dependencyIds":[`...)
		for i, d := range rec.DependencyIDs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, d)
		}
		b = append(b, ']')
	}
	b = appendJSONUint(b, "seq", rec.Seq, false)
	b = appendJSONTime(b, "createdAt", rec.CreatedAt, all)
	b = appendJSONTime(b, "updatedAt", rec.UpdatedAt, all)
	b = appendJSONTime(b, "ackedAt", rec.AckedAt, all)
	b = appendJSONField(b, "userId", rec.UserID, true)
	b = appendJSONField(b, "tenantId", rec.TenantID, all)
	b = appendJSONUint(b, "authGeneration", rec.AuthGeneration, all)
	if rec.Status != queue.StatusAcked {
		b = append(b, `,"`+fieldLive+`":1`...)
	}
	if !rec.Status.Settled() {
		b = appendJSONField(b, fieldEntity, rec.EntityKey(), true)
		if rec.OperationKey != "" {
			b = append(b, `,"`+fieldOpKey+`":[`...)
			b = appendJSONString(b, rec.UserID)
			b = append(b, ',')
			b = appendJSONString(b, rec.OperationKey)
			b = append(b, ']')
		}
	}
	return append(b, '}')
}

// appendJSONName appends ,"name": (name needs no escaping).
func appendJSONName(b []byte, name string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

// appendJSONField appends ,"name":"v" (always when set, else only for a
// non-empty v).
func appendJSONField(b []byte, name, v string, always bool) []byte {
	if v == "" && !always {
		return b
	}
	return appendJSONString(appendJSONName(b, name), v)
}

func appendJSONInt(b []byte, name string, v int64, always bool) []byte {
	if v == 0 && !always {
		return b
	}
	return strconv.AppendInt(appendJSONName(b, name), v, 10)
}

// appendJSONUint appends a uint64 field as JavaScript would store
// float64(v): exact up to 2^53, rounded above like setUint.
func appendJSONUint(b []byte, name string, v uint64, always bool) []byte {
	if v == 0 && !always {
		return b
	}
	b = appendJSONName(b, name)
	if v <= maxExactUint {
		return strconv.AppendUint(b, v, 10)
	}
	return strconv.AppendFloat(b, float64(v), 'g', -1, 64)
}

const maxExactUint = 1<<53 - 1

// appendJSONTime appends a time as Unix milliseconds (setTime); a zero time
// is null when always, else omitted.
func appendJSONTime(b []byte, name string, t time.Time, always bool) []byte {
	if t.IsZero() {
		if always {
			b = append(appendJSONName(b, name), "null"...)
		}
		return b
	}
	return strconv.AppendInt(appendJSONName(b, name), t.UnixMilli(), 10)
}

// appendJSONString appends s as a JSON string: '"', '\\' and control
// characters escaped, every other byte (valid UTF-8 or not) as it is.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// AppendRecordJSON appends the stored form of rec, a fresh record (see
// PlainAppend), as Enqueue's store writes it: one JSON object of its
// scalar fields (appendRecordJSON). withPayload says whether the stored
// object also has the payload's bytes, set after parsing.
func AppendRecordJSON(b []byte, rec *queue.Record) (out []byte, withPayload bool) {
	return appendRecordJSON(b, rec, false), rec.Payload != nil
}
