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

type decoder struct {
	store, key string
}

func (d decoder) corrupt(reason string) error {
	return &CorruptError{Store: d.store, Key: d.key, Reason: reason}
}

// guard turns a panic of a decode (a throwing getter on a foreign object)
// into a CorruptError.
func (d decoder) guard(err *error) {
	if r := recover(); r != nil {
		*err = d.corrupt("unreadable")
	}
}

func (d decoder) uint(v js.Value, name string) (uint64, error) {
	f := v.Get(name)
	if f.Type() != js.TypeNumber {
		return 0, d.corrupt(name + ": not a number")
	}
	x := f.Float()
	if math.IsNaN(x) || x < 0 || x > MaxToken || x != math.Trunc(x) {
		return 0, d.corrupt(name + ": not an integer in 0..2^53-1")
	}
	return uint64(x), nil
}

// checkStr checks that field name is a string of at most maxLen UTF-16
// units, without copying it: a foreign record may hold a huge string.
func (d decoder) checkStr(v js.Value, name string, maxLen int) (js.Value, error) {
	f := v.Get(name)
	if f.Type() != js.TypeString {
		return f, d.corrupt(name + ": not a string")
	}
	if n := jsLengthOf.Invoke(f, jsEmpty); n.Type() != js.TypeNumber || n.Float() > float64(maxLen) {
		return f, d.corrupt(name + ": too long")
	}
	return f, nil
}

func (d decoder) str(v js.Value, name string, maxLen int) (string, error) {
	f, err := d.checkStr(v, name, maxLen)
	if err != nil {
		return "", err
	}
	return f.String(), nil
}

// resource checks that the record's resource field is its key (jsKey is
// the key as a JavaScript string).
func (d decoder) resource(v, jsKey js.Value) error {
	f := v.Get("resource")
	if f.Type() != js.TypeString {
		return d.corrupt("resource: not a string")
	}
	if !f.Equal(jsKey) {
		return d.corrupt("resource: does not match its key")
	}
	return nil
}

// jsLengthOf(s, "") is s.length: lastIndexOf("") is the length of the
// string, and this bound form reads it in one call without wrapping the
// string in an object (Value.Length refuses primitives).
var (
	jsLengthOf = js.Global().Get("Function").Get("prototype").Get("call").Call("bind",
		js.Global().Get("String").Get("prototype").Get("lastIndexOf"))
	jsEmpty = js.ValueOf("")
)

// epochOf validates an epoch record and returns its epoch (0 when absent).
func epochOf(v js.Value, resource string, jsKey js.Value) (epoch uint64, err error) {
	if v.IsUndefined() {
		return 0, nil
	}
	d := decoder{StoreEpochs, resource}
	defer d.guard(&err)
	if v.Type() != js.TypeObject { // null has its own type
		return 0, d.corrupt("not an object")
	}
	if err = d.resource(v, jsKey); err != nil {
		return 0, err
	}
	if epoch, err = d.uint(v, "epoch"); err != nil {
		return 0, err
	}
	if _, err = d.checkStr(v, "ownerId", MaxOperationIDLen); err != nil {
		return 0, err
	}
	if _, err = d.uint(v, "updatedAt"); err != nil {
		return 0, err
	}
	return epoch, nil
}

func decodeEpoch(v js.Value, resource string) (r EpochRecord, err error) {
	if v.IsUndefined() {
		return EpochRecord{Resource: resource}, nil
	}
	d := decoder{StoreEpochs, resource}
	defer d.guard(&err)
	if v.Type() != js.TypeObject {
		return EpochRecord{}, d.corrupt("not an object")
	}
	if err = d.resource(v, js.ValueOf(resource)); err != nil {
		return EpochRecord{}, err
	}
	r.Resource = resource
	if r.Epoch, err = d.uint(v, "epoch"); err != nil {
		return EpochRecord{}, err
	}
	if r.OwnerID, err = d.str(v, "ownerId", MaxOperationIDLen); err != nil {
		return EpochRecord{}, err
	}
	ts, err := d.uint(v, "updatedAt")
	if err != nil {
		return EpochRecord{}, err
	}
	r.UpdatedAt = int64(ts)
	return r, nil
}

func decodeFence(v js.Value, resource string) (FenceRecord, error) {
	return decodeFenceKey(v, resource, js.ValueOf(resource))
}

func decodeFenceKey(v js.Value, resource string, jsKey js.Value) (r FenceRecord, err error) {
	if v.IsUndefined() {
		return FenceRecord{Resource: resource}, nil
	}
	d := decoder{StoreFences, resource}
	defer d.guard(&err)
	if v.Type() != js.TypeObject {
		return FenceRecord{}, d.corrupt("not an object")
	}
	if err = d.resource(v, jsKey); err != nil {
		return FenceRecord{}, err
	}
	r.Resource = resource
	if r.Highest, err = d.uint(v, "highest"); err != nil {
		return FenceRecord{}, err
	}
	if r.HighestSeq, err = d.uint(v, "highestSeq"); err != nil {
		return FenceRecord{}, err
	}
	recent, err := d.str(v, "recent", maxRecentLen)
	if err != nil {
		return FenceRecord{}, err
	}
	if recent != "" {
		r.Recent = splitSep(recent, '\n')
		for _, id := range r.Recent {
			if id == "" || len(id) > MaxOperationIDLen || hasControl(id) {
				return FenceRecord{}, d.corrupt("recent: not a list of operation IDs")
			}
		}
	}
	return r, nil
}
