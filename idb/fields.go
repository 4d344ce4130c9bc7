package idb

import (
	"encoding/binary"
	"math"
)

// The fields of a stored record as read, before any judgement: Go's own
// path reads them from the record (records_js.go), the loader's idb hooks
// (fast.js) gather them into the exports' scratch (parseFields). Either
// way they are judged here, once.

// Kinds of a field as read.
const (
	fieldNumber = 0
	fieldString = 1
	fieldOther  = 2
)

// field is one property of a record: its kind, a number's value, a
// string's length in UTF-16 units and, where the text is wanted, the text.
type field struct {
	kind byte
	num  float64
	n    int
	s    string
}

// Kinds of a record as read.
const (
	recAbsent     = 0
	recNotObject  = 1
	recObject     = 2
	recUnreadable = 3 // a getter threw
)

// Its resource field: not a string, the record's key, another string.
const (
	resNotString = 0
	resKey       = 1
	resOther     = 2
)

// fields is a record as read: for epoch records epoch, ownerId, updatedAt;
// for fence records highest, highestSeq, recent.
type fields struct {
	kind     byte
	resource byte
	f        [3]field
}

type decoder struct {
	store, key string
}

func (d decoder) corrupt(reason string) error {
	return &CorruptError{Store: d.store, Key: d.key, Reason: reason}
}

func (d decoder) uint(f field, name string) (uint64, error) {
	if f.kind != fieldNumber {
		return 0, d.corrupt(name + ": not a number")
	}
	x := f.num
	if math.IsNaN(x) || x < 0 || x > MaxToken || x != math.Trunc(x) {
		return 0, d.corrupt(name + ": not an integer in 0..2^53-1")
	}
	return uint64(x), nil
}

// str checks that f is a string of at most maxLen UTF-16 units.
func (d decoder) str(f field, name string, maxLen int) error {
	if f.kind != fieldString {
		return d.corrupt(name + ": not a string")
	}
	if f.n > maxLen {
		return d.corrupt(name + ": too long")
	}
	return nil
}

// object judges the record's kind and resource field; absent reports a
// record that is not there.
func (d decoder) object(r *fields) (absent bool, err error) {
	switch r.kind {
	case recAbsent:
		return true, nil
	case recObject:
	case recUnreadable:
		return false, d.corrupt("unreadable")
	default:
		return false, d.corrupt("not an object")
	}
	switch r.resource {
	case resKey:
		return false, nil
	case resOther:
		return false, d.corrupt("resource: does not match its key")
	}
	return false, d.corrupt("resource: not a string")
}

// epochFields validates an epoch record read as r and returns its epoch (0
// when absent).
func epochFields(r *fields, resource string) (uint64, error) {
	d := decoder{StoreEpochs, resource}
	if absent, err := d.object(r); absent || err != nil {
		return 0, err
	}
	epoch, err := d.uint(r.f[0], "epoch")
	if err != nil {
		return 0, err
	}
	if err := d.str(r.f[1], "ownerId", MaxOperationIDLen); err != nil {
		return 0, err
	}
	if _, err := d.uint(r.f[2], "updatedAt"); err != nil {
		return 0, err
	}
	return epoch, nil
}

// fenceFields decodes a fence record read as r (zero when absent).
func fenceFields(r *fields, resource string) (FenceRecord, error) {
	d := decoder{StoreFences, resource}
	if absent, err := d.object(r); absent || err != nil {
		if absent {
			return FenceRecord{Resource: resource}, nil
		}
		return FenceRecord{}, err
	}
	rec := FenceRecord{Resource: resource}
	var err error
	if rec.Highest, err = d.uint(r.f[0], "highest"); err != nil {
		return FenceRecord{}, err
	}
	if rec.HighestSeq, err = d.uint(r.f[1], "highestSeq"); err != nil {
		return FenceRecord{}, err
	}
	if err := d.str(r.f[2], "recent", maxRecentLen); err != nil {
		return FenceRecord{}, err
	}
	if recent := r.f[2].s; recent != "" {
		rec.Recent = splitSep(recent, '\n')
		for _, id := range rec.Recent {
			if id == "" || len(id) > MaxOperationIDLen || hasControl(id) {
				return FenceRecord{}, d.corrupt("recent: not a list of operation IDs")
			}
		}
	}
	return rec, nil
}

// parseFields reads a record fast.js's record() gathered at b: u8 kind;
// for an object u8 resource and three fields, each u8 kind then a
// number's float64 or a string's u32 UTF-16 length, u32 byte length and
// its UTF-8 (all little-endian). It returns the rest of b; ok false for
// bytes it does not understand.
func parseFields(b []byte) (r fields, rest []byte, ok bool) {
	if len(b) < 1 {
		return r, nil, false
	}
	r.kind, b = b[0], b[1:]
	if r.kind != recObject {
		return r, b, r.kind <= recUnreadable
	}
	if len(b) < 1 {
		return r, nil, false
	}
	r.resource, b = b[0], b[1:]
	for i := range r.f {
		if len(b) < 1 {
			return r, nil, false
		}
		f := &r.f[i]
		f.kind, b = b[0], b[1:]
		switch f.kind {
		case fieldNumber:
			if len(b) < 8 {
				return r, nil, false
			}
			f.num, b = math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:]
		case fieldString:
			if len(b) < 8 {
				return r, nil, false
			}
			f.n = int(binary.LittleEndian.Uint32(b))
			w := int(binary.LittleEndian.Uint32(b[4:]))
			if b = b[8:]; w > len(b) {
				return r, nil, false
			}
			f.s, b = string(b[:w]), b[w:]
		case fieldOther:
		default:
			return r, nil, false
		}
	}
	return r, b, true
}

// putAdvanced writes the fence fast.js stores for an accepted apply at b:
// float64 highest and highestSeq, u32 the byte length of recent and its
// text. It returns the bytes written, or -1 when b is too small.
func putAdvanced(b []byte, next FenceRecord) int {
	n := joinedLen(next.Recent)
	if len(b) < 20+n {
		return -1
	}
	binary.LittleEndian.PutUint64(b, math.Float64bits(float64(next.Highest)))
	binary.LittleEndian.PutUint64(b[8:], math.Float64bits(float64(next.HighestSeq)))
	binary.LittleEndian.PutUint32(b[16:], uint32(n))
	appendSep(b[20:20], next.Recent, '\n') // in place: b has room for it
	return 20 + n
}
