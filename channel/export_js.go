//go:build js && wasm

package channel

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall/js"
	"unsafe"

	"github.com/tabfence/tabfence/jsglue"
)

// The message path's wasm exports. Every call from JavaScript into Go
// through a js.Func is an "event": wasm_exec.js stores it, Go reads its id,
// this and arguments back through JavaScript (a reference with a finalizer
// each), runs the handler, then runs the scheduler until every goroutine is
// idle before it returns. Measured in headless Chromium here (channel
// round trip bench, and a trivial call after 3 ms idle): 60–140 µs per
// entry, against about 7 µs for a //go:wasmexport function, which is a
// plain call on the current goroutine's stack.
//
// The price of an export, and the rules of this file:
//   - it must never block (no contended lock, no channel wait, no await):
//     a goroutine switch that finds nothing else to run would return to
//     JavaScript in the middle of the call. The code behind these exports
//     is the code the js.Func handlers run, which already must not block:
//     a message handler or a post returns at once.
//   - goroutines it makes runnable (a Subscribe delivery, a verification)
//     do not run before the next event. So every export reports whether it
//     started goroutines (counted) or woke one (code that wakes one calls
//     Woke: dispatch does for the delivery goroutine), and the loader then
//     enters Go once through a js.Func (Kick) in a microtask: they run
//     before the next task, as they would have run before the event
//     returned. (runtime/metrics can count runnable goroutines in general,
//     but it costs 8 KB of the download, brotli.)
//   - it takes and returns numbers only: text crosses through xscratch,
//     and the payload is fetched from the loader (HeldPayload).
//
// Without the loader (Go's own tests, a page that loads the .wasm itself)
// nothing calls them and every path below is the js.Func one.

// exported numbers the channels the loader's rx may name.
var exported exports

type exports struct {
	mu   sync.Mutex
	next int32
	m    map[int32]*Channel
}

func (x *exports) add(c *Channel) int32 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[int32]*Channel{}
	}
	x.next++
	x.m[x.next] = c
	return x.next
}

func (x *exports) get(id int32) *Channel {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.m[id]
}

func (x *exports) remove(id int32) {
	if id == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.m, id)
}

// xscratch is the exports' scratch: a buffer in this instance's memory,
// which the loader reads and writes in place through a view of the
// memory (its address from tabfence_scratch). Text crosses it without a
// call: JavaScript writes a header or a kind there before it calls an
// export, and during an export Go writes there the text it hands to the
// loader (CallFast, a negative length). Against the scratch Uint8Array,
// that saves a crossing per text (CopyBytesToGo or CopyBytesToJS: a call
// into JavaScript each).
var xscratch [scratchLen]byte

// inExport is set while an export runs (Entered to Leave): CallFast then
// hands text over through xscratch.
var inExport bool

// exportScratch returns xscratch's address in the instance's memory.
//
//go:wasmexport tabfence_scratch
func exportScratch() int32 { return int32(uintptr(unsafe.Pointer(&xscratch[0]))) }

// exportRx receives the envelope whose header the loader's rx wrote into
// xscratch (n bytes) for channel id; the payload is HeldPayload's. It
// returns the kick bit (Leave). (The name is new with xscratch: a loader
// that writes headers into the scratch Uint8Array does not find it, and
// stays on the js.Func path.)
//
//go:wasmexport tabfence_channel_rx2
func exportRx(id, n int32) (kick int32) {
	g := Entered()
	defer func() {
		if r := recover(); r != nil {
			if h := jsglue.PanicHandler; h != nil {
				h(r)
			}
			kick = Leave(g)
		}
	}()
	if c := exported.get(id); c != nil {
		c.receiveHeaderHeld(ScratchString(int(n)), c.HeldPayload(), true)
	}
	return Leave(g)
}

// HeldPayload is the payload the loader is handing to an export (its
// FAST.payload, the fast path c was opened with), undefined without one.
func (c *Channel) HeldPayload() js.Value {
	if c.payload.IsUndefined() {
		return js.Undefined()
	}
	return c.payload.Invoke()
}

var (
	kickOnce sync.Once
	kick     *jsglue.Callback
)

// Kick is a function that does nothing but enter Go, so the goroutines an
// export made runnable run (see above).
func Kick() js.Value {
	kickOnce.Do(func() { kick = jsglue.NewCallback(func(js.Value, []js.Value) any { return nil }) })
	return kick.Value
}

// woken is set when code on an export's path makes a goroutine runnable.
var woken atomic.Bool

// Woke tells the export in progress, if any, that the caller made a
// goroutine runnable (a send or close it waits on): the loader then enters
// Go once, so it runs (see above). Starting a goroutine needs no call; the
// exports count them.
func Woke() { woken.Store(true) }

// Entered is called first thing by an export; Leave(Entered()) is its kick
// bit: 1 when goroutines were started or woken in between.
func Entered() int {
	woken.Store(false)
	inExport = true
	return runtime.NumGoroutine()
}

// Leave returns the kick bit for an export entered with n goroutines.
func Leave(n int) int32 {
	inExport = false
	if woken.Swap(false) || runtime.NumGoroutine() > n {
		return 1
	}
	return 0
}

// ScratchString copies the n bytes the loader wrote into xscratch before
// it called an export; garbage n gives "".
func ScratchString(n int) string {
	if n <= 0 || n > len(xscratch) {
		return ""
	}
	return string(xscratch[:n])
}

// WriteScratch copies b into the scratch buffer and returns its length, or
// -1 when it does not fit.
func WriteScratch(b []byte) int {
	if len(b) > scratchLen {
		return -1
	}
	scratchMu.Lock()
	defer scratchMu.Unlock()
	return js.CopyBytesToJS(scratch, b)
}

// Scratch is the scratch Uint8Array (see Fast).
func Scratch() js.Value { return scratch }
