//go:build js && wasm && !tabfence_core

package main

import (
	"context"
	"errors"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
)

// The outbox() area of the API: a durable, fenced outbox shared by the tabs
// of one browser (package outbox, Runtime). Opening and its options are in
// outbox_open_js.go, the enqueue path in outbox_js.go.

// outboxHandle is the Go state behind one object returned by outbox(); its
// methods are the object's (outboxes).
type outboxHandle struct {
	id float64 // its handle in outboxes
	rt *outbox.Runtime
}

// outboxes are the page's outbox objects (see objects).
var outboxes objects[*outboxHandle]

func init() {
	type m = method[*outboxHandle]
	outboxes.define(errOutboxClosed,
		m{name: "enqueue", call: promiseCall, fn: (*outboxHandle).enqueue, wrap: enqueueMethod},
		m{name: "flush", call: asyncCall, fn: (*outboxHandle).flush},
		m{name: "status", call: asyncCall, fn: (*outboxHandle).status},
		m{name: "onStatus", call: syncCall, fn: (*outboxHandle).onStatus},
		m{name: "onEvent", call: syncCall, fn: (*outboxHandle).onEvent},
		m{name: "deadLetters", call: asyncCall, fn: (*outboxHandle).deadLetters},
		m{name: "retry", call: asyncCall, fn: (*outboxHandle).retry},
		m{name: "discard", call: asyncCall, fn: (*outboxHandle).discard},
		m{name: "pause", call: asyncCall, fn: (*outboxHandle).pause},
		m{name: "resume", call: asyncCall, fn: (*outboxHandle).resume},
		m{name: "login", call: asyncCall, fn: (*outboxHandle).login},
		m{name: "logout", call: asyncCall, fn: (*outboxHandle).logout},
		m{name: "close", call: asyncCall, fn: (*outboxHandle).close, idle: js.Undefined()},
		m{name: "unsupported", call: asyncCall, fn: (*outboxHandle).unsupported},
	)
}

var bg = context.Background()

// runtimeErrorNames: see outboxErrorNames; each name is one of those too
// (TestRuntimeErrorNamesAreListed).
var runtimeErrorNames = [...]errorName{
	{outbox.ErrFenceUnavailable, "NetworkError"},
	{outbox.ErrRuntimeClosed, "InvalidStateError"},
}

// nameAbort is the name of an IndexedDB abort without a cause of its own.
const nameAbort = "AbortError"

// obErr names the errors of the outbox API.
func obErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[interface {
		error
		JSName() string
	}](err); ok {
		return err
	}
	for _, m := range outboxErrorNames {
		if errors.Is(err, m.target) {
			return &namedError{err, m.name}
		}
	}
	for _, m := range runtimeErrorNames {
		if errors.Is(err, m.target) {
			return &namedError{err, m.name}
		}
	}
	// A transaction IndexedDB aborted without a cause of its own (the
	// cause's name, QuotaExceededError, is kept when it has one): nothing
	// was written.
	if errors.Is(err, outbox.ErrTxAborted) && jsglue.NameOf(err) == "Error" {
		return &namedError{err, nameAbort}
	}
	return err
}

// errOutboxClosed is what a method of a closed outbox fails with.
var errOutboxClosed = &namedError{outbox.ErrRuntimeClosed, "InvalidStateError"}

func (o *outboxHandle) flush([]js.Value) (any, error) {
	rep, skipped, err := o.rt.Flush(bg)
	if err != nil && !errors.Is(err, outbox.ErrPaused) {
		return nil, obErr(err)
	}
	r := newObject()
	r.Set("skipped", skipped)
	r.Set("paused", errors.Is(err, outbox.ErrPaused))
	r.Set("claimed", rep.Claimed)
	r.Set("acked", rep.Acked)
	r.Set("retried", rep.Retried)
	r.Set("deadLettered", rep.DeadLettered)
	r.Set("terminal", rep.Terminal)
	r.Set("conflicts", rep.Conflicts)
	return r, nil
}

func (o *outboxHandle) status([]js.Value) (any, error) {
	st, err := o.rt.Status(bg)
	if err != nil {
		return nil, obErr(err)
	}
	return statusJS(st), nil
}

func (o *outboxHandle) onStatus(args []js.Value) (any, error) {
	fn, err := callbackArg("outbox.onStatus", args)
	if err != nil {
		return nil, err
	}
	return unsubscriber(o.rt.OnStatus(func(st outbox.RuntimeStatus) { callLater(fn, statusJS(st)) })), nil
}

func (o *outboxHandle) onEvent(args []js.Value) (any, error) {
	fn, err := callbackArg("outbox.onEvent", args)
	if err != nil {
		return nil, err
	}
	return unsubscriber(o.rt.OnEvent(func(e outbox.Event) { callLater(fn, eventJS(e)) })), nil
}

func callbackArg(where string, args []js.Value) (js.Value, error) {
	fn := at(args, 0)
	if !isType(fn, js.TypeFunction) {
		return fn, typeErr(where, "fn must be a function")
	}
	return fn, nil
}

// unsubscriber is the function onStatus and onEvent return; one callback
// per subscription, released when called.
func unsubscriber(unsub func()) js.Value {
	var cb *jsglue.Callback
	cb = jsglue.NewCallback(func(js.Value, []js.Value) any {
		unsub()
		cb.Release()
		return nil
	})
	return cb.Value
}

func (o *outboxHandle) deadLetters([]js.Value) (any, error) {
	return recordsJS(o.rt.DeadLetters(bg))
}

func (o *outboxHandle) unsupported([]js.Value) (any, error) {
	return recordsJS(o.rt.Outbox().Unsupported(bg))
}

func recordsJS(recs []outbox.Record, err error) (any, error) {
	if err != nil {
		return nil, obErr(err)
	}
	arr := jsArray.New()
	for i := range recs {
		arr.Call("push", recordJS(&recs[i]))
	}
	return arr, nil
}

// idArg reads the id (or user) argument of retry, discard and login.
func idArg(where string, args []js.Value) (string, error) {
	id := at(args, 0)
	if !isType(id, js.TypeString) || id.String() == "" {
		return "", typeErr("outbox."+where, "id must be a non-empty string")
	}
	return id.String(), nil
}

func (o *outboxHandle) retry(args []js.Value) (any, error) {
	id, err := idArg("retry", args)
	if err != nil {
		return nil, err
	}
	return nil, obErr(o.rt.Retry(bg, id))
}

func (o *outboxHandle) discard(args []js.Value) (any, error) {
	id, err := idArg("discard", args)
	if err != nil {
		return nil, err
	}
	return nil, obErr(o.rt.Discard(bg, id))
}

func (o *outboxHandle) login(args []js.Value) (any, error) {
	user, err := idArg("login", args)
	if err != nil {
		return nil, err
	}
	return nil, obErr(o.rt.Login(bg, outbox.Session{UserID: user}))
}

func (o *outboxHandle) logout(args []js.Value) (any, error) {
	n, err := o.rt.Logout(bg, field(at(args, 0), "purge").Truthy())
	return n, obErr(err)
}

func (o *outboxHandle) pause([]js.Value) (any, error) { return nil, obErr(o.rt.Pause(bg)) }

func (o *outboxHandle) resume([]js.Value) (any, error) { return nil, obErr(o.rt.Resume(bg)) }

func (o *outboxHandle) close([]js.Value) (any, error) {
	outboxes.remove(o.id)
	return nil, o.rt.Close()
}
