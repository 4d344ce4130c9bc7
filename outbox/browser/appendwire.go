package browser

import (
	"strings"

	"github.com/tabfence/tabfence/outbox"
)

// The loader's wire format of plain appends (append.js): the operation it
// hands Go in xscratch, and the batches of record ids it reports committed.
// Native, so its bounds are tested natively.

// ParseCommitted reads a batch of committed plain appends from the loader:
// their record ids joined by ";" (one string crosses into Go per batch).
// fn gets each id and says whether it was pending; an empty entry or one
// that was not pending is counted in dropped, never guessed at.
func ParseCommitted(batch string, fn func(id string) (pending bool)) (dropped int) {
	for batch != "" {
		e := batch
		if i := strings.IndexByte(batch, ';'); i >= 0 {
			e, batch = batch[:i], batch[i+1:]
		} else {
			batch = ""
		}
		if e == "" || !fn(e) {
			dropped++
		}
	}
	return dropped
}

// MaxDependencyIDs bounds an operation's dependencyIds as the JavaScript
// API takes them (a longer list is a TypeError).
const MaxDependencyIDs = 1000

// DecodeOpFields reads an operation the loader's opFields wrote (b: the
// bytes it used): u32 count, u32 the dependency list's length as given
// (0xffffffff: none), u32 byte lengths, then operationType, operationKey,
// entityType, entityId, the payload and the dependency ids. ok is false for
// anything else, and for a list longer than MaxDependencyIDs (Go's own
// reading then gives the error). The payload aliases b.
func DecodeOpFields(b []byte) (op outbox.Op, ok bool) {
	n := len(b)
	if n < 8 {
		return op, false
	}
	u32 := func(i int) int {
		return int(uint32(b[i]) | uint32(b[i+1])<<8 | uint32(b[i+2])<<16 | uint32(b[i+3])<<24)
	}
	count, given := u32(0), u32(4)
	if count < 5 || count > n/4 || 8+4*count > n || given != 0xffffffff && given > MaxDependencyIDs {
		return op, false
	}
	off := 8 + 4*count
	var fixed [5][]byte
	for i := 0; i < count; i++ {
		w := u32(8 + 4*i)
		if w > n-off {
			return op, false
		}
		f := b[off : off+w : off+w]
		off += w
		if i < len(fixed) {
			fixed[i] = f
		} else {
			op.DependencyIDs = append(op.DependencyIDs, string(f))
		}
	}
	op.OperationType, op.OperationKey = string(fixed[0]), string(fixed[1])
	op.EntityType, op.EntityID = string(fixed[2]), string(fixed[3])
	op.Payload = fixed[4]
	return op, true
}
