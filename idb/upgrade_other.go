//go:build !(js && wasm)

package idb

// UpgradeTx is the versionchange transaction handed to schema steps. Outside
// the browser (native tests of the decision logic) it only carries the
// versions; its methods exist in the js/wasm build.
type UpgradeTx struct {
	OldVersion uint64
	NewVersion uint64
}
