//go:build js && wasm

package loader

import (
	"runtime"
	"sync"
	"sync/atomic"
	"syscall/js"
	"unsafe"

	"github.com/tabfence/tabfence/jsglue"
)

// The runtime's wasm exports (declared in package main) are how the loader
// enters Go on hot paths: a call through a js.Func is an "event" (stored
// by wasm_exec.js, its id, this and arguments read back through JavaScript,
// then the scheduler run until every goroutine is idle), tens of µs; an
// export is a plain call on the current goroutine's stack (see
// docs/fastpath.md for the figures). The price, and the rules:
//   - an export never blocks (no contended lock, no channel wait): a
//     goroutine switch that finds nothing to run would return to
//     JavaScript mid-call. The code behind the exports is code js.Func
//     handlers run, which must not block either.
//   - goroutines it makes runnable do not run before the next event: every
//     export reports whether it started goroutines (counted) or woke one
//     (Woke), and the loader then enters Go once through Kick in a
//     microtask, so they run before the next task as they would have
//     before the event returned.
//   - it takes and returns numbers only: text crosses through xscratch, a
//     buffer in this instance's memory that the loader reads and writes in
//     place, and the payload being handed over is read back with
//     HeldPayload.

// XScratchLen is xscratch's size: an outbox operation up to a 64 KiB
// payload and its other fields, and the record Go writes back after it;
// channel headers are far smaller.
const XScratchLen = 80 << 10

var xscratch [XScratchLen]byte

// inExport is set while an export runs (Entered to Leave).
var inExport bool

// ScratchAddr is xscratch's address in the instance's memory (the export
// tabfence_scratch).
func ScratchAddr() int32 { return int32(uintptr(unsafe.Pointer(&xscratch[0]))) }

// XScratch is xscratch itself: what the loader wrote before it called an
// export, and where Go writes the text it hands back during one.
func XScratch() []byte { return xscratch[:] }

// InExport reports whether an export is running: text for the loader may
// then cross through xscratch.
func InExport() bool { return inExport }

// ScratchString copies the n bytes the loader wrote into xscratch before
// it called an export; garbage n gives "".
func ScratchString(n int) string {
	if n <= 0 || n > len(xscratch) {
		return ""
	}
	return string(xscratch[:n])
}

// woken is set when code on an export's path makes a goroutine runnable.
var woken atomic.Bool

// Woke tells the export in progress, if any, that the caller made a
// goroutine runnable (a send or close it waits on): the loader then enters
// Go once, so it runs. Starting a goroutine needs no call; Leave counts
// them.
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

// Recovered is an export's deferred guard: a panic is reported
// (jsglue.PanicHandler) instead of trapping the instance, and *kick is set
// to Leave(n).
func Recovered(n int, kick *int32) {
	if r := recover(); r != nil {
		if h := jsglue.PanicHandler; h != nil {
			h(r)
		}
		*kick = Leave(n)
	}
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

// ScratchLen is the size of Scratch, the Uint8Array through which text
// crosses outside exports (a js.Func's arguments, a hook Go calls): written
// there, text crosses as its length, a number, which costs no reference;
// longer text crosses as a string.
const ScratchLen = 1024

var (
	// scratch is that Uint8Array. JavaScript writes text there and calls Go
	// at once, which copies it out first thing; Go writes text there and
	// calls a hook, which reads it at once. Neither side yields in between,
	// so one buffer serves everyone.
	scratch   = js.Global().Get("Uint8Array").New(ScratchLen)
	scratchMu sync.Mutex // Go's writers
)

// Scratch is the scratch Uint8Array.
func Scratch() js.Value { return scratch }

// ReadScratch copies the n bytes JavaScript wrote into Scratch (garbage n:
// "").
func ReadScratch(n int) string {
	if n <= 0 || n > ScratchLen {
		return ""
	}
	b := make([]byte, n)
	js.CopyBytesToGo(b, scratch)
	return unsafe.String(&b[0], n)
}

// WriteScratch copies b into Scratch and returns its length, or -1 when it
// does not fit.
func WriteScratch(b []byte) int {
	if len(b) > ScratchLen {
		return -1
	}
	scratchMu.Lock()
	defer scratchMu.Unlock()
	return js.CopyBytesToJS(scratch, b)
}

// CallText calls fn(target, Scratch, h, payload) with text as h: during an
// export through xscratch, without a call (a negative length); else
// through Scratch (its length) when it fits, or as a string.
func CallText(fn, target js.Value, text []byte, payload js.Value) error {
	if inExport && len(text) <= len(xscratch) {
		n := copy(xscratch[:], text)
		_, err := jsglue.Invoke(fn, target, scratch, -n, payload) // never panics: Invoke recovers
		return err
	}
	scratchMu.Lock()
	defer scratchMu.Unlock()
	var h any
	if len(text) <= ScratchLen {
		h = js.CopyBytesToJS(scratch, text)
	} else {
		h = string(text)
	}
	_, err := jsglue.Invoke(fn, target, scratch, h, payload) // never panics: Invoke recovers
	return err
}
