//go:build js && wasm

package browser

import (
	"syscall/js"

	"github.com/tabfence/tabfence/internal/loaderstats"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/jsglue/loader"
	"github.com/tabfence/tabfence/outbox/idbstore"
	"github.com/tabfence/tabfence/outbox/queue"
)

// The runtime's plain appends through the loader's outbox hooks
// (append.js): the JavaScript API's enqueue writes the operation into
// xscratch and calls the export tabfence_outbox_append (package main),
// whose body is AppendFromScratch: Go decides and builds the record
// (PlainAppend) and writes it back; the hook then puts it in its own
// IndexedDB transaction, in the caller's task, and reports the commits in
// batches (done). Without the loader every enqueue is Enqueue.

// UseLoader hands this runtime's plain appends to the loader's outbox
// hooks under key, the number the loader's export names it by: now, and
// again on every change (OnAppendChange). errJS makes the JavaScript error
// an aborted append's promise rejects with. Without the loader it does
// nothing.
func (r *Runtime) UseLoader(key int, errJS func(error) js.Value) {
	set := loader.Group(loader.GroupOutbox, loaderLayout).Func("appends")
	if set.IsUndefined() {
		return
	}
	done := jsglue.NewCallback(func(_ js.Value, args []js.Value) any { return r.appendsDone(args, errJS) })
	r.listeners = append(r.listeners, done.Release)
	publish := func() { r.publishTarget(set, key, done.Value) }
	r.OnAppendChange(publish)
	publish()
}

// publishTarget tells the loader's appends hook where this runtime's plain
// appends go: the connection, the transaction's store names (records
// first) and options, done, the kick (see jsglue/loader) and the action
// enqueue resolves with; or that every enqueue must be Enqueue (closed,
// not an open idbstore.Store).
func (r *Runtime) publishTarget(set js.Value, key int, done js.Value) {
	st, isIDB := r.store.(*idbstore.Store)
	if r.closed.Load() || !isIDB {
		_, _ = jsglue.Invoke(set, key, nil)
		return
	}
	db, names, opts, ok := st.AppendTarget()
	if !ok {
		_, _ = jsglue.Invoke(set, key, nil)
		return
	}
	_, _ = jsglue.Invoke(set, key, db, names, opts, done, loader.Kick(), string(queue.ActionAppended))
}

// AppendFromScratch is the export tabfence_outbox_append's body: the
// operation the loader wrote into xscratch (n bytes, DecodeOpFields) is
// built into its record when it is a plain append (PlainAppend), whose
// stored form (AppendRecordJSON) is written into xscratch right after the
// operation. It returns the record's length << 2, bit 1 set when the
// stored object has the payload's bytes (the operation's, still in
// xscratch); 0 when the loader must call Enqueue instead.
func (r *Runtime) AppendFromScratch(n int) int32 {
	x := loader.XScratch()
	if _, isIDB := r.store.(*idbstore.Store); r.closed.Load() || !isIDB || n <= 0 || n > len(x) {
		return 0
	}
	op, ok := DecodeOpFields(x[:n])
	if !ok {
		return 0
	}
	rec, ok := r.ob.PlainAppend(op) // copies the payload: nothing keeps x
	if !ok {
		return 0
	}
	var buf [1024]byte
	b, withPayload := idbstore.AppendRecordJSON(buf[:0], &rec)
	if len(b) > len(x)-n {
		r.ob.ForgetAppend(rec.ID)
		return 0
	}
	copy(x[n:], b)
	v := int32(len(b)) << 2
	if withPayload {
		v |= 2
	}
	return v
}

// appendsDone is the loader's report: done(batch) for committed appends
// (their ids, ParseCommitted), done(undefined, txErr, id) for one that was
// not written, which returns the error its promise rejects with.
func (r *Runtime) appendsDone(args []js.Value, errJS func(error) js.Value) any {
	arg := func(i int) js.Value {
		if i < len(args) {
			return args[i]
		}
		return js.Undefined()
	}
	if b := arg(0); b.Type() == js.TypeString {
		loaderstats.Batches.Add(1)
		var n int64
		dropped := ParseCommitted(b.String(), func(id string) bool {
			ok := r.ob.CommittedAppend(id)
			if ok {
				n++
			}
			return ok
		})
		loaderstats.Records.Add(n)
		loaderstats.Dropped.Add(int64(dropped))
		if n > 0 {
			r.announceLater()
		}
		return nil
	}
	if id := arg(2); id.Type() == js.TypeString {
		r.ob.ForgetAppend(id.String())
	}
	return errJS(idbstore.EnqueueAborted(arg(1)))
}

// EnqueueMethod returns the JavaScript API's enqueue method of the outbox
// the loader knows by key (see UseLoader): the loader's enqueuer around
// slow (the js.Func, Go's enqueue), or slow without the loader.
func EnqueueMethod(key int, slow js.Value) js.Value {
	enq := loader.Group(loader.GroupOutbox, loaderLayout).Func("enqueuer")
	if enq.IsUndefined() {
		return slow
	}
	return enq.Invoke(key, slow)
}

// LoaderOpFields is the loader's opFields (append.js; DecodeOpFields reads
// what it writes), or undefined without the loader.
func LoaderOpFields() js.Value {
	return loader.Group(loader.GroupOutbox, loaderLayout).Func("opFields")
}
