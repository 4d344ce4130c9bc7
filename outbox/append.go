package outbox

import (
	"sync"

	"github.com/tabfence/tabfence/outbox/queue"
)

// A plain append is an operation whose policy cannot coalesce it (no
// dedupe policy reads the queue for it) and whose payload is stored
// inline: its store writes the record without reading anything. In the
// browser, such a record can be written in the caller's own task, with no
// wait for a goroutine (the loader's hooks, see Runtime.AppendFromScratch):
// Go builds the record here, exactly as Enqueue builds it, the loader
// writes it, and Go learns of its commit afterwards (CommittedAppend) and
// does then what Enqueue does after its commit. Anything else goes through
// Enqueue, which decides it and gives the typed error.

// maxPendingAppends bounds the plain appends built and not yet committed or
// forgotten: beyond it (a loader that never reports back) every enqueue
// goes through Enqueue.
const maxPendingAppends = 1 << 14

// PlainAppend returns the record Enqueue would store for op when op is a
// plain append under the current session, and holds it as pending until
// CommittedAppend or ForgetAppend. ok is false for anything else: Enqueue
// then decides (ErrNoSession, queue.ErrUnknownOperation, a dedupe policy, a
// payload for the blob store).
func (o *Outbox) PlainAppend(op Op) (rec queue.Record, ok bool) {
	req, err := o.request(op)
	if err != nil || req.Policy.ReadsQueue(op.OperationKey) || !req.Inlines(len(op.Payload)) {
		return queue.Record{}, false
	}
	plan, err := queue.PlanEnqueue(nil, req, req.Record.CreatedAt)
	if err != nil || !plan.Write || plan.Result.Action != queue.ActionAppended || plan.Put.PayloadRef != "" {
		return queue.Record{}, false
	}
	rec = plan.Put
	rec.Seq = 0 // assigned by the store's key generator
	ev := Event{Kind: EventEnqueue, At: rec.CreatedAt, RecordID: rec.ID, OperationKeyHash: HashKey(op.OperationKey), Reason: string(queue.ActionAppended)}
	if !o.pending.add(ev) {
		return queue.Record{}, false
	}
	return rec, true
}

// CommittedAppend emits the enqueue event of the pending plain append id,
// which committed; ok false for an id that is not pending (another
// script's call, a bug, a second report), which is dropped.
func (o *Outbox) CommittedAppend(id string) (ok bool) {
	ev, ok := o.pending.take(id)
	if ok {
		o.emit(ev)
	}
	return ok
}

// ForgetAppend drops the pending plain append id, which was not written
// (its transaction aborted, or could not be opened).
func (o *Outbox) ForgetAppend(id string) { o.pending.take(id) }

// pendingAppends are the plain appends built and not yet reported: the
// enqueue event each emits once committed, by record id.
type pendingAppends struct {
	mu sync.Mutex
	m  map[string]Event
}

func (p *pendingAppends) add(ev Event) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.m) >= maxPendingAppends {
		return false
	}
	if p.m == nil {
		p.m = map[string]Event{}
	}
	p.m[ev.RecordID] = ev
	return true
}

func (p *pendingAppends) take(id string) (Event, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, ok := p.m[id]
	delete(p.m, id)
	return a, ok
}

// OnSessionChange registers fn, called after every Login and Logout, once
// the new session is in place and before Logout purges. One function; a
// later call replaces it.
func (o *Outbox) OnSessionChange(fn func()) { o.sessionHook.set(fn) }

// changeHook is one registered callback, replaced by the next registration and
// called outside its lock (it may call back into its owner).
type changeHook struct {
	mu sync.Mutex
	fn func()
}

func (h *changeHook) set(fn func()) {
	h.mu.Lock()
	h.fn = fn
	h.mu.Unlock()
}

func (h *changeHook) call() {
	h.mu.Lock()
	fn := h.fn
	h.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// HashKey is the OperationKeyHash of events about operation key k: the
// first 16 hex digits of its SHA-256 ("" for no key). Operation keys may
// hold user data; events carry only this.
func HashKey(k string) string {
	if k == "" {
		return ""
	}
	return queue.HashPayload([]byte(k))[:16]
}
