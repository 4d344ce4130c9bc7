//go:build js && wasm

package browser

import (
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

// change is one validated change of a delta or snapshot.
type change struct {
	store, key string
	deleted    bool
	value      js.Value
}

var jsonParse = js.Global().Get("JSON").Get("parse")

// parseChanges reads a change list (JSON, parsed by the browser) and
// checks every change with checkChange: a bad list is ErrChanges.
func parseChanges(b []byte, stores []string) ([]change, error) {
	v, err := jsglue.Invoke(jsonParse, string(b))
	if err != nil {
		return nil, join(ErrChanges, err)
	}
	return checkChanges(v, stores)
}

func checkChanges(v js.Value, stores []string) ([]change, error) {
	if !jsglue.IsArray(v) {
		return nil, joinWhy(ErrChanges, "changes are not an array")
	}
	n := jsglue.Len(v)
	if n > MaxChanges {
		return nil, joinWhy(ErrChanges, "too many changes")
	}
	out := make([]change, 0, n)
	for i := 0; i < n; i++ {
		e := v.Index(i)
		if typeOf(e) != js.TypeObject {
			return nil, joinWhy(ErrChanges, "a change is not an object")
		}
		st, k, del, val := e.Get("store"), e.Get("key"), e.Get("deleted"), e.Get("value")
		store, ok1 := jsString(st, maxField)
		key, ok2 := jsString(k, MaxKey)
		if !ok1 || !ok2 {
			return nil, joinWhy(ErrChanges, "a change's store and key are strings")
		}
		deleted := typeOf(del) == js.TypeBoolean && del.Bool()
		if !del.IsUndefined() && !deleted {
			return nil, joinWhy(ErrChanges, "deleted is true or absent")
		}
		c := change{store: store, key: key, deleted: deleted, value: val}
		if err := checkChange(stores, c.store, c.key, !val.IsUndefined(), deleted); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
