//go:build js && wasm

package benchjs

import (
	"errors"
	"syscall/js"
)

// ErrRefused: the page would not build the script (a CSP without
// 'unsafe-eval').
var ErrRefused = errors.New("benchjs: the page refused to build the raw JavaScript (Function)")

// IDB makes idb.js: an object with loop(db, kind, key, from, n), resolving
// to the elapsed ms of n transactions of kind ("allocate" or "apply"), and
// phases(db, kind, key, from, n), resolving to the mean ms of each phase.
func IDB() (v js.Value, err error) {
	defer func() {
		if recover() != nil {
			v, err = js.Undefined(), ErrRefused
		}
	}()
	return js.Global().Get("Function").New("appStore", IDBSource).Invoke(IDBStore), nil
}
