//go:build js && wasm && !tabfence_core

package main

import (
	"context"
	"syscall/js"

	"github.com/tabfence/tabfence/outbox/browser"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// tf.backgroundSync(options): the outbox as a Service Worker opens it, from
// the same options the pages give tf.outbox, passive (browser.RuntimeConfig
// .Passive): it sends nothing until a sync event calls drain.

// syncHandle is the Go state behind one object backgroundSync returned.
type syncHandle struct {
	id float64
	rt *browser.Runtime
}

// syncOutboxes are the worker's SyncOutbox objects (see objects).
var syncOutboxes objects[*syncHandle]

func init() {
	type m = jsapi.Method[*syncHandle]
	syncOutboxes.Define(errOutboxClosed,
		m{Name: "drain", Call: jsapi.Async, Fn: (*syncHandle).drain},
		m{Name: "close", Call: jsapi.Async, Fn: (*syncHandle).close, Idle: js.Undefined()},
	)
}

// openSyncOutbox implements tf.backgroundSync(options).
// A user option is refused before anything opens: the worker serves every
// tab of the origin and must never log one in for all of them; it sends as
// the queue's session user (a page's login).
func openSyncOutbox(args []js.Value) (any, error) {
	o := jsapi.At(args, 0)
	if jsapi.IsType(o, js.TypeObject) && !jsapi.Field(o, "user").IsUndefined() {
		return nil, jsapi.TypeErr("backgroundSync", "user is not an option of a worker: it sends as the queue's session user (a page's login)")
	}
	cfg, err := readOutboxOptions(o)
	if err != nil {
		return nil, err
	}
	cfg.Passive = true
	rt, err := browser.OpenRuntime(context.Background(), cfg)
	if err != nil {
		return nil, obErr(err)
	}
	h := &syncHandle{rt: rt}
	h.id = syncOutboxes.Add(h)
	obj := queueObject(cfg, rt)
	jsapi.DefineConst(obj, "syncTag", rt.SyncTag())
	syncOutboxes.Install(obj, h.id)
	return obj, nil
}

// drain is SyncOutbox.drain({lastChance, timeoutMs}): it resolves with the
// report whatever the outcome; only bad arguments and a closed outbox
// reject.
func (h *syncHandle) drain(args []js.Value) (any, error) {
	o := jsapi.At(args, 0)
	if !o.IsUndefined() && !o.IsNull() && !jsapi.IsType(o, js.TypeObject) {
		return nil, jsapi.TypeErr("backgroundSync.drain", "options must be an object")
	}
	last, timeout, err := jsapi.DrainArgs(jsapi.ArgOf(jsapi.Field(o, "lastChance")), jsapi.ArgOf(jsapi.Field(o, "timeoutMs")))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(bg, timeout)
	defer cancel()
	rep, err := h.rt.Drain(ctx, browser.DrainOptions{LastChance: last})
	if err != nil {
		return nil, obErr(err)
	}
	r := flushCounts(rep.FlushReport)
	r.Set("remaining", rep.Remaining)
	r.Set("retry", rep.Retry)
	r.Set("reason", rep.Reason)
	return r, nil
}

func (h *syncHandle) close([]js.Value) (any, error) {
	syncOutboxes.Remove(h.id)
	return nil, h.rt.Close()
}
