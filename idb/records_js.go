//go:build js && wasm

package idb

import (
	"math"
	"syscall/js"
)

// ---- records ----
//
// Records are plain objects under out-of-line keys, so anything a foreign
// script stores under our keys can be read back — and is checked field by
// field: a wrong type is a CorruptError, never a panic (a decode recovers
// from a throwing getter too).
//
// Every property read or write is a call across the wasm boundary, the main
// cost of a transaction besides IndexedDB itself, so the hot paths avoid the
// ones they can: the resource field is compared with the key already in
// JavaScript (Equal is ===, decided in Go), and AllocateToken validates the
// owner ID without copying it.

// encodeEpoch returns the record to store for r. prev is the record read in
// the same transaction: when it is one (it passed validation, so its
// resource is r's), its fields are updated in place, which saves creating
// an object and setting the resource — calls into JavaScript, the main cost
// here. key is r.Resource as a JavaScript string.
func (d *DB) encodeEpoch(r EpochRecord, key, prev js.Value) js.Value {
	o := prev
	if o.Type() != js.TypeObject {
		o = jsObject.New()
		o.Set("resource", key)
	}
	o.Set("epoch", float64(r.Epoch))
	o.Set("ownerId", d.ownerJS(r.OwnerID))
	o.Set("updatedAt", float64(r.UpdatedAt))
	return o
}

// ownerJS converts an owner ID, remembering the last one: a tab allocates
// under the same ID again and again.
func (d *DB) ownerJS(id string) js.Value {
	d.mu.Lock()
	if !d.ownerSet || d.owner != id {
		d.owner, d.ownerV, d.ownerSet = id, js.ValueOf(id), true
	}
	v := d.ownerV
	d.mu.Unlock()
	return v
}

// encodeFence is encodeEpoch for a fence record.
func encodeFence(r FenceRecord, key, prev js.Value) js.Value {
	o := prev
	if o.Type() != js.TypeObject {
		o = jsObject.New()
		o.Set("resource", key)
	}
	o.Set("highest", float64(r.Highest))
	o.Set("highestSeq", float64(r.HighestSeq))
	o.Set("recent", joinSep(r.Recent, '\n'))
	return o
}

// readFields reads record v as fields (fields.go) for the judges there,
// with the names of its three fields; text says which of them is wanted as
// text (-1: none). A string's length is read without copying it: a
// foreign record may hold a huge string, and only one within maxText is
// copied. A throwing getter reads as recUnreadable.
func readFields(v, jsKey js.Value, names *[3]string, text, maxText int) (r fields) {
	if v.IsUndefined() {
		return r
	}
	if v.Type() != js.TypeObject { // null has its own type
		r.kind = recNotObject
		return r
	}
	defer func() {
		if recover() != nil {
			r = fields{kind: recUnreadable}
		}
	}()
	r.kind = recObject
	switch f := v.Get("resource"); {
	case f.Type() != js.TypeString:
		r.resource = resNotString
	case f.Equal(jsKey):
		r.resource = resKey
	default:
		r.resource = resOther
	}
	for i, name := range names {
		x, f := v.Get(name), &r.f[i]
		switch x.Type() {
		case js.TypeNumber:
			f.kind, f.num = fieldNumber, x.Float()
		case js.TypeString:
			f.kind, f.n = fieldString, math.MaxInt
			if n := jsLengthOf.Invoke(x, jsEmpty); n.Type() == js.TypeNumber && n.Float() <= float64(math.MaxInt32) {
				f.n = int(n.Float())
			}
			if i == text && f.n <= maxText {
				f.s = x.String()
			}
		default:
			f.kind = fieldOther
		}
	}
	return r
}

var jsObject = js.Global().Get("Object")

var (
	epochNames = [3]string{"epoch", "ownerId", "updatedAt"}
	fenceNames = [3]string{"highest", "highestSeq", "recent"}
)

// jsLengthOf(s, "") is s.length: lastIndexOf("") is the length of the
// string, and this bound form reads it in one call without wrapping the
// string in an object (Value.Length refuses primitives).
var (
	jsLengthOf = js.Global().Get("Function").Get("prototype").Get("call").Call("bind",
		js.Global().Get("String").Get("prototype").Get("lastIndexOf"))
	jsEmpty = js.ValueOf("")
)

// epochOf validates an epoch record and returns its epoch (0 when absent).
func epochOf(v js.Value, resource string, jsKey js.Value) (uint64, error) {
	r := readFields(v, jsKey, &epochNames, -1, 0)
	return epochFields(&r, resource)
}

func decodeEpoch(v js.Value, resource string) (EpochRecord, error) {
	r := readFields(v, js.ValueOf(resource), &epochNames, 1, MaxOperationIDLen)
	epoch, err := epochFields(&r, resource)
	if err != nil {
		return EpochRecord{}, err
	}
	if r.kind == recAbsent {
		return EpochRecord{Resource: resource}, nil
	}
	return EpochRecord{Resource: resource, Epoch: epoch, OwnerID: r.f[1].s, UpdatedAt: int64(r.f[2].num)}, nil
}

func decodeFence(v js.Value, resource string) (FenceRecord, error) {
	return decodeFenceKey(v, resource, js.ValueOf(resource))
}

func decodeFenceKey(v js.Value, resource string, jsKey js.Value) (FenceRecord, error) {
	r := readFields(v, jsKey, &fenceNames, 2, maxRecentLen)
	return fenceFields(&r, resource)
}
