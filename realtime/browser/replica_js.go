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
// fence remembers the old, higher ones (writeDelta deduplicates instead).
func deliverOp(version uint64) string { return opVersion(version) + "-" + channel.NewID()[:8] }

// writeDelta writes a delta's changes and the version row, in the caller's
// transaction, unless the replica's own version row says it holds the
// delta already (a delta sent again after a failed announce).
func writeDelta(tx *idb.WriteTx, changes []change, version uint64) error {
	v, err := tx.Get(StoreMeta, js.ValueOf(metaVersion))
	if err != nil {
		return err
	}
	if v.Type() == js.TypeNumber && v.Float() >= float64(version) {
		return nil
	}
	if err := writeChanges(tx, changes); err != nil {
		return err
	}
	return putVersion(tx, version)
}
