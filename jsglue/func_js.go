//go:build js && wasm

package jsglue

import (
	"sync"
	"syscall/js"
)

// Callbacks are the only way jsglue hands Go code to JavaScript. All of them
// go through ONE js.Func, the dispatcher, bound to a per-callback id with
// Function.prototype.bind. So:
//   - no js.Func is created per lock request, message listener or await, and
//     the count of live callbacks returns to where it started when they are
//     released;
//   - a callback called after its release (a late promise settlement, an
//     event already queued) finds no entry and returns undefined instead of
//     killing the program with "call to released function".
//
// A callback runs on the JavaScript event loop: it must return at once. To
// do blocking work, start a goroutine and hand JavaScript a Deferred.

var (
	cbMu       sync.Mutex
	cbNext     float64
	cbTable    = map[float64]func(this js.Value, args []js.Value) any{}
	cbOnce     sync.Once
	cbDispatch js.Func
	// PanicHandler, when set, is told about a panic recovered in a callback;
	// the callback then returns undefined. A panic inside a js.Func would
	// otherwise kill the whole wasm program.
	PanicHandler func(recovered any)
)

func dispatcher() js.Func {
	cbOnce.Do(func() {
		cbDispatch = js.FuncOf(func(this js.Value, args []js.Value) (ret any) {
			if len(args) == 0 {
				return js.Undefined()
			}
			id := args[0].Float()
			cbMu.Lock()
			fn := cbTable[id]
			cbMu.Unlock()
			if fn == nil {
				return js.Undefined()
			}
			defer func() {
				if r := recover(); r != nil {
					ret = js.Undefined()
					if h := PanicHandler; h != nil {
						h(r)
					}
				}
			}()
			return fn(this, args[1:])
		})
	})
	return cbDispatch
}

// Callback is a JavaScript function backed by Go code.
type Callback struct {
	id    float64
	Value js.Value
}

// NewCallback registers fn and returns a JavaScript function that calls it.
// Release it when JavaScript no longer needs it.
func NewCallback(fn func(this js.Value, args []js.Value) any) *Callback {
	d := dispatcher()
	cbMu.Lock()
	cbNext++
	id := cbNext
	cbTable[id] = fn
	cbMu.Unlock()
	return &Callback{id: id, Value: d.Value.Call("bind", nil, id)}
}

// Release unregisters the callback. Safe to call more than once; a call
// from JavaScript after Release is a no-op returning undefined.
func (c *Callback) Release() {
	if c == nil {
		return
	}
	cbMu.Lock()
	delete(cbTable, c.id)
	cbMu.Unlock()
}

// LiveCallbacks reports how many callbacks are registered and not yet
// released. Tests use it to prove that lock requests and messages leak none.
func LiveCallbacks() int {
	cbMu.Lock()
	defer cbMu.Unlock()
	return len(cbTable)
}
