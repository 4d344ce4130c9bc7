//go:build js && wasm

package browser

import (
	"syscall/js"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/idb"
)

// deliverOp is the fenced operation id of one delta's write. It is unique
// per write and unsequenced: the fence must not deduplicate deltas by
// version, since after a server reset versions start lower again while the
// fence remembers the old, higher ones (the batch's writes check the replica's version row instead).
func deliverOp(version uint64) string { return opVersion(version) + "-" + channel.NewID()[:8] }

// storedVersion reads the replica's version row in the caller's
// transaction (0 when there is none).
func storedVersion(tx *idb.WriteTx) (uint64, error) {
	v, err := tx.Get(StoreMeta, js.ValueOf(metaVersion))
	if err != nil || v.Type() != js.TypeNumber {
		return 0, err
	}
	return uint64(v.Float()), nil
}

// heldVersion is the replica version this tab's leader last committed
// (its follower view, advanced after each commit).
func (c *Conn) heldVersion() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fol.Version()
}
