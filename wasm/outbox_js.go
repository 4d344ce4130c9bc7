//go:build js && wasm && !tabfence_core

package main

import (
	"context"
	"strconv"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/browser"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// The enqueue path of the outbox() area (outbox_api_js.go has the rest).
// Payloads are opaque bytes: the JSON of an object payload is made by the
// JavaScript engine (JSON.stringify), never by a Go encoder.

var (
	jsJSON       = jsapi.JSJSON
	jsUint8Array = jsapi.JSUint8Array
)

// enqueue is outbox.enqueue(op). A plain append (see outbox.PlainAppend)
// is built by Go through a wasm export and written by the loader's hook in
// the caller's task (browser's UseLoader): no goroutine waits for its
// commit. This method takes every other operation (a dedupe policy reads
// the queue first, a large payload goes to the blob store, an invalid one
// gets its typed error), and every operation on a page without the
// loader: a goroutine that waits for the commit.
func (o *outboxHandle) enqueue(args []js.Value) (any, error) {
	op, err := opArg(jsapi.At(args, 0))
	if err != nil {
		return nil, err
	}
	return jsglue.Async(func() (any, error) {
		res, err := o.rt.Enqueue(context.Background(), op)
		if err != nil {
			return nil, obErr(err)
		}
		return enqueueResult(res), nil
	}), nil
}

// useLoaderAppends hands the outbox's plain appends to the loader's hooks
// when the page has them: the loader learns every change synchronously,
// so after a logout no append of the old user is written, even while the
// purge runs.
func useLoaderAppends(o *outboxHandle) {
	loaderOpFields = browser.LoaderOpFields()
	o.rt.UseLoader(int(o.id), func(err error) js.Value { return jsglue.ToJS(obErr(err)) })
}

// enqueueMethod returns the enqueue method of outbox handle id: the
// loader's enqueuer around the js.Func slow (plain appends are written in
// the caller's task, see enqueue), or slow.
func enqueueMethod(id float64, slow js.Value) js.Value {
	m := browser.EnqueueMethod(int(id), slow)
	if !m.Equal(slow) {
		jsapi.JSReflect.Call("set", m, jsapi.SymAsync, true)
	}
	return m
}

// enqueueResult is enqueue's result object.
func enqueueResult(res queue.EnqueueResult) js.Value {
	o := jsapi.NewObject()
	o.Set("id", res.ID)
	o.Set("action", jsapi.Recurring.Get(string(res.Action)))
	return o
}

// loaderOpFields is the loader's opFields hook, or undefined without the
// loader: looked up when an outbox is made, not per enqueue.
var loaderOpFields js.Value

// opArg reads enqueue's operation: through the loader's opFields when
// the page has it (one call instead of one per field; it takes plainly
// shaped operations only), else field by field.
func opArg(v js.Value) (outbox.Op, error) {
	if op, ok := opArgFast(v); ok {
		if op.OperationType == "" {
			return op, jsapi.TypeErr("outbox.enqueue", "operationType must be a string")
		}
		return op, nil
	}
	return opArgSlow(v)
}

// maxDependencyIDs bounds an operation's dependencyIds (its TypeError
// names the number; the loader's opFields leaves longer lists here).
const maxDependencyIDs = browser.MaxDependencyIDs

// opBuf is opFields' buffer; an operation that does not fit is read
// field by field.
var opBufV js.Value

func opBuf() js.Value {
	if opBufV.IsUndefined() { // js/wasm runs one goroutine at a time, none between these lines
		opBufV = jsUint8Array.New(72 << 10) // a 64 KiB payload and the other fields
	}
	return opBufV
}

// opArgFast reads v with the loader's opFields, ok false when it did not
// take v.
func opArgFast(v js.Value) (op outbox.Op, ok bool) {
	if loaderOpFields.Type() != js.TypeFunction {
		return op, false
	}
	r, err := jsglue.Invoke(loaderOpFields, v, opBuf())
	if err != nil || r.Type() != js.TypeNumber {
		return op, false
	}
	return opFromBuf(r.Int())
}

// opFromBuf decodes the n bytes opFields wrote into opBuf.
func opFromBuf(n int) (op outbox.Op, ok bool) {
	buf := opBuf()
	if n < 4 || n > buf.Length() {
		return op, false
	}
	b := make([]byte, n)
	js.CopyBytesToGo(b, buf)
	return browser.DecodeOpFields(b)
}

// opArgSlow reads enqueue's operation field by field.
func opArgSlow(v js.Value) (outbox.Op, error) {
	if t, _ := jsglue.TypeOf(v); t != js.TypeObject {
		return outbox.Op{}, jsapi.TypeErr("outbox.enqueue", "op must be an object")
	}
	var op outbox.Op
	str := func(name string, required bool) (string, error) {
		f := jsapi.Field(v, name)
		ft, _ := jsglue.TypeOf(f) // a BigInt is neither
		switch {
		case ft == js.TypeString && (f.String() != "" || !required):
			return f.String(), nil
		case (ft == js.TypeUndefined || ft == js.TypeNull) && !required:
			return "", nil
		}
		return "", jsapi.TypeErr("outbox.enqueue", name+" must be a string")
	}
	var err error
	if op.OperationType, err = str("operationType", true); err != nil {
		return op, err
	}
	if op.EntityType, err = str("entityType", false); err != nil {
		return op, err
	}
	if op.EntityID, err = str("entityId", false); err != nil {
		return op, err
	}
	if op.OperationKey, err = str("operationKey", false); err != nil {
		return op, err
	}
	p := jsapi.Field(v, "payload")
	if jsapi.IsType(p, js.TypeUndefined) {
		return op, jsapi.TypeErr("outbox.enqueue", "payload is required")
	}
	var ok bool
	if op.Payload, ok = jsapi.PayloadBytes(p); !ok {
		return op, jsapi.TypeErr("outbox.enqueue", "payload must be a string, a Uint8Array or JSON-serializable")
	}
	if deps := jsapi.Field(v, "dependencyIds"); jsapi.IsType(deps, js.TypeObject) {
		// Read by index through Reflect.get (a throwing getter or proxy
		// trap is an absent element, as for the fields above), bounded: a
		// forged length must not keep the tab in this loop.
		l := jsapi.Field(deps, "length")
		if !jsapi.IsType(l, js.TypeNumber) || !(l.Float() >= 0) || l.Float() > maxDependencyIDs {
			return op, jsapi.TypeErr("outbox.enqueue", "dependencyIds must be an array of at most 1000 ids")
		}
		for i := range int(l.Float()) {
			if d := jsapi.Field(deps, strconv.Itoa(i)); jsapi.IsType(d, js.TypeString) {
				op.DependencyIDs = append(op.DependencyIDs, d.String())
			}
		}
	}
	return op, nil
}
