//go:build js && wasm

package raw

import (
	"context"
	_ "embed"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

// The page's freeze event and the runtime's open transactions.
//
// A frozen page (Page Lifecycle: a background tab the browser freezes, or
// CDP) runs no timers and gets no IndexedDB events, yet a transaction it
// holds stays open in the browser: its next request waits for an event the
// page never handles. Every other tab's transaction over the same stores
// then waits behind it, until the page resumes or is discarded. A leader
// frozen mid-apply would so block the tab that stole its leadership: its
// token allocation and its first write.
//
// So every connection opened through OpenDatabase (idb.Open and the outbox's
// store) routes its transactions through one tracker: an own "transaction"
// property on the IDBDatabase that records what the prototype's returns
// until it completes or aborts. One pair of freeze/resume listeners serves
// the page: on freeze the open transactions are aborted (again in a
// microtask, after whatever the event woke has run), and until resume every
// new one is aborted as it is created. Go then sees an aborted transaction,
// an error, never a hang, and nothing half-written commits. The hooks of
// idb's fast.js call db.transaction on the connection, so theirs are tracked too;
// and idb's own calls wait for the resume before they open one (Thawed).
//
// A connection may spare the app's own writes (OpenOptions.SpareWritesWithout):
// an outbox's enqueue holds a user's mutation and is left to finish on resume.
// Code that must stay out of the tracker calls IDBDatabase.prototype.transaction
// itself (the loader's append path).
//
// The tracker is plain JavaScript, built with the Function constructor, so
// nothing re-enters Go at the wrong moment. Where the page's CSP refuses eval
// it is missing: transactions then behave as they do without tabfence.
var lifecycleJS = newLifecycleJS()

func newLifecycleJS() js.Value {
	mk, err := call(js.Global(), "Function", "gf,gr", lifecycleSrc)
	if err != nil {
		return js.Undefined()
	}
	gf := jsglue.NewCallback(func(js.Value, []js.Value) any { setFrozen(true); return nil })
	gr := jsglue.NewCallback(func(js.Value, []js.Value) any { setFrozen(false); return nil })
	v, err := call(mk, "call", js.Undefined(), gf.Value, gr.Value)
	if err != nil || v.Type() != js.TypeObject {
		gf.Release()
		gr.Release()
		return js.Undefined()
	}
	return v // the callbacks live as long as the page
}

// thawCh is non-nil while the page is frozen, and closed at resume.
var (
	thawMu sync.Mutex
	thawCh chan struct{}
)

func setFrozen(frozen bool) {
	thawMu.Lock()
	defer thawMu.Unlock()
	switch {
	case frozen && thawCh == nil:
		thawCh = make(chan struct{})
	case !frozen && thawCh != nil:
		close(thawCh)
		thawCh = nil
	}
}

// Thawed waits until the page is not frozen, and returns ctx's error if it
// ended (at once when it already has): work that a
// frozen page starts anyway (an evaluated script, a channel message waking a
// goroutine) opens its transaction after the resume instead of having it
// aborted at once. Idb's own transactions pass here; the tracker aborts any
// other opened while frozen.
func Thawed(ctx context.Context) error {
	thawMu.Lock()
	ch := thawCh
	thawMu.Unlock()
	if ch == nil {
		return ctx.Err()
	}
	select {
	case <-ch:
		return ctx.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// jsFrozenMsg is what a transaction aborted for the freeze reports.
const jsFrozenMsg = "the page was frozen: its open IndexedDB transactions were aborted so that they do not block other tabs"

// lifecycleSrc is freeze.js, the tracker's body (a function body, not a
// module: it is made with Function so that a page without the loader has
// it too).
//
//go:embed freeze.js
var lifecycleSrc string

// track puts connection db under the tracker. spare lists the stores whose
// presence in a readwrite transaction's scope makes it abortable; nil spares
// nothing (see OpenOptions.SpareWritesWithout).
func track(db js.Value, spare []string) {
	if lifecycleJS.Type() != js.TypeObject {
		return
	}
	w := js.Null()
	if spare != nil {
		w = jsArray.New(len(spare))
		for i, s := range spare {
			w.SetIndex(i, jsString(s))
		}
	}
	_, _ = call(lifecycleJS, "track", db, w)
}

var jsArray = js.Global().Get("Array")

// AbortOpen aborts the open transactions of connection db (an IDBDatabase
// opened by OpenDatabase) that the page's freeze event would abort: for a
// tab that learns it was frozen or hung while it owned something (another
// tab stole it), before its late events arrive. Each aborted transaction
// reports an AbortError; nothing of it is written.
func AbortOpen(db js.Value) {
	if lifecycleJS.Type() != js.TypeObject {
		return
	}
	_, _ = call(lifecycleJS, "abortOpen", db)
}

// frozenCause is the cause of a transaction the tracker aborted, or nil.
func frozenCause(tx js.Value) error {
	if tx.Get("tfFrozen").Type() != js.TypeNumber {
		return nil
	}
	return jsglue.NewJSError("AbortError", jsFrozenMsg)
}
