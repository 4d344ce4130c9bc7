//go:build js && wasm

package browser

import (
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/idbstore"
)

// announceLater schedules the OUTBOX_CHANGED announcement and flush hint of
// a committed enqueue (see later).
func (r *Runtime) announceLater() {
	r.lt.mu.Lock()
	r.lt.announce = true
	r.lt.mu.Unlock()
	r.later()
}

// OnAppendChange registers fn, called synchronously whenever AppendTemplate
// may have changed: after Login and Logout (before a purge starts, see
// Outbox.OnSessionChange) and on Close. One function; a later call
// replaces it.
func (r *Runtime) OnAppendChange(fn func()) { r.appendHook.Store(&fn) }

func (r *Runtime) appendChanged() {
	if fn := r.appendHook.Load(); fn != nil && *fn != nil {
		(*fn)()
	}
}

// AppendTemplate is what the loader's FAST.appends takes to write plain
// appends itself (see AppendRules and Store.AppendTarget): an object
// with db, names, opts, user, tenant, authGeneration, schemaVersion,
// inlineLimit, types (a Map of operation type to [maxAttempts, keyed]) and
// done (the function the loader calls with a batch of committed appends,
// see ParseAppended, or with (undefined, error) for an aborted one, when it
// returns the error to reject with). It is null when every enqueue must go
// through Enqueue: the runtime is closed, its store is not an open
// Store, or AppendRules says so. Made once per change (OnAppendChange),
// never per enqueue.
func (r *Runtime) AppendTemplate(done js.Value) js.Value {
	st, isIDB := r.store.(*idbstore.Store)
	if r.closed.Load() || !isIDB {
		return js.Null()
	}
	rules, ok := r.ob.AppendRules()
	if !ok {
		return js.Null()
	}
	db, names, opts, ok := st.AppendTarget()
	if !ok {
		return js.Null()
	}
	types := js.Global().Get("Map").New()
	for name, t := range rules.Types {
		types.Call("set", name, []any{t.MaxAttempts, t.Keyed})
	}
	o := js.Global().Get("Object").New()
	for _, f := range []struct {
		name string
		v    any
	}{
		{"db", db}, {"names", names}, {"opts", opts},
		{"user", rules.Session.UserID}, {"tenant", rules.Session.TenantID},
		{"authGeneration", float64(rules.Session.AuthGeneration)},
		{"schemaVersion", rules.SchemaVersion}, {"inlineLimit", rules.InlineLimit},
		{"types", types}, {"done", done},
	} {
		o.Set(f.name, f.v)
	}
	return o
}

// Appended does for committed appends of a builder outside Go what Enqueue
// does after its commit: the enqueue events, then OUTBOX_CHANGED and the
// flush hint (once for the batch).
func (r *Runtime) Appended(recs []outbox.AppendedRecord) {
	if len(recs) == 0 {
		return
	}
	for _, a := range recs {
		r.ob.Appended(a.ID, a.OperationKeyHash, a.At)
	}
	r.announceLater()
}

// announceEvery bounds how often a tab posts OUTBOX_CHANGED: a
// BroadcastChannel post costs the poster more than the rest of an enqueue's
// work on the page (docs/outbox-notes.md), and a burst of enqueues needs
// one flush hint, not one per record.
const announceEvery = 50 * time.Millisecond

// announceChanged posts OUTBOX_CHANGED now if none was posted in the last
// announceEvery, else makes sure one is posted when that interval ends
// (leading and trailing edge): every committed enqueue is followed by an
// announcement posted after its commit; a lone one at once.
func (r *Runtime) announceChanged() {
	now := time.Now()
	r.lt.mu.Lock()
	if wait := r.lt.announcedAt.Add(announceEvery).Sub(now); wait > 0 {
		if r.lt.announceT == nil {
			r.lt.announceT = time.AfterFunc(wait, func() {
				r.lt.mu.Lock()
				r.lt.announceT = nil
				r.lt.announcedAt = time.Now()
				r.lt.mu.Unlock()
				r.post(kindOutboxChanged, js.Undefined())
			})
		}
		r.lt.mu.Unlock()
		return
	}
	r.lt.announcedAt = now
	r.lt.mu.Unlock()
	r.post(kindOutboxChanged, js.Undefined())
}
