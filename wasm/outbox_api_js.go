//go:build js && wasm && !tabfence_core

package main

import (
	"context"
	"errors"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/browser"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// The outbox() area of the API: a durable, fenced outbox shared by the tabs
// of one browser (package outbox, Runtime). Opening and its options are in
// outbox_open_js.go, the enqueue path in outbox_js.go.

// outboxHandle is the Go state behind one object returned by outbox(); its
// methods are the object's (outboxes).
type outboxHandle struct {
	id float64 // its handle in outboxes
	rt *browser.Runtime
}

// outboxes are the page's outbox objects (see objects).
var outboxes objects[*outboxHandle]

func init() {
	type m = jsapi.Method[*outboxHandle]
	outboxes.Define(errOutboxClosed,
		m{Name: "enqueue", Call: jsapi.Promise, Fn: (*outboxHandle).enqueue, Wrap: enqueueMethod},
		m{Name: "flush", Call: jsapi.Async, Fn: (*outboxHandle).flush},
		m{Name: "status", Call: jsapi.Async, Fn: (*outboxHandle).status},
		m{Name: "onStatus", Call: jsapi.Sync, Fn: (*outboxHandle).onStatus},
		m{Name: "onEvent", Call: jsapi.Sync, Fn: (*outboxHandle).onEvent},
		m{Name: "deadLetters", Call: jsapi.Async, Fn: (*outboxHandle).deadLetters},
		m{Name: "retry", Call: jsapi.Async, Fn: (*outboxHandle).retry},
		m{Name: "discard", Call: jsapi.Async, Fn: (*outboxHandle).discard},
		m{Name: "pause", Call: jsapi.Async, Fn: (*outboxHandle).pause},
		m{Name: "resume", Call: jsapi.Async, Fn: (*outboxHandle).resume},
		m{Name: "login", Call: jsapi.Async, Fn: (*outboxHandle).login},
		m{Name: "logout", Call: jsapi.Async, Fn: (*outboxHandle).logout},
		m{Name: "close", Call: jsapi.Async, Fn: (*outboxHandle).close, Idle: js.Undefined()},
		m{Name: "unsupported", Call: jsapi.Async, Fn: (*outboxHandle).unsupported},
	)
}

var bg = context.Background()

// runtimeErrorNames: see outboxErrorNames; each name is one of those too
// (TestRuntimeErrorNamesAreListed).
var runtimeErrorNames = [...]errorName{
	{browser.ErrFenceUnavailable, "NetworkError"},
	{browser.ErrRuntimeClosed, "InvalidStateError"},
}

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
var errOutboxClosed = &namedError{browser.ErrRuntimeClosed, "InvalidStateError"}

func (o *outboxHandle) flush([]js.Value) (any, error) {
	rep, skipped, err := o.rt.Flush(bg)
	if err != nil && !errors.Is(err, outbox.ErrPaused) {
		return nil, obErr(err)
	}
	r := flushCounts(rep)
	r.Set("skipped", skipped)
	r.Set("paused", errors.Is(err, outbox.ErrPaused))
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
	fn, err := jsapi.CallbackArg("outbox.onStatus", args)
	if err != nil {
		return nil, err
	}
	return jsapi.Unsubscriber(o.rt.OnStatus(func(st browser.RuntimeStatus) { jsapi.CallLater(fn, statusJS(st)) })), nil
}

func (o *outboxHandle) onEvent(args []js.Value) (any, error) {
	fn, err := jsapi.CallbackArg("outbox.onEvent", args)
	if err != nil {
		return nil, err
	}
	return jsapi.Unsubscriber(o.rt.OnEvent(func(e outbox.Event) { jsapi.CallLater(fn, eventJS(e)) })), nil
}

func (o *outboxHandle) deadLetters([]js.Value) (any, error) {
	return recordsJS(o.rt.DeadLetters(bg))
}

func (o *outboxHandle) unsupported([]js.Value) (any, error) {
	return recordsJS(o.rt.Outbox().Unsupported(bg))
}

func recordsJS(recs []queue.Record, err error) (any, error) {
	if err != nil {
		return nil, obErr(err)
	}
	arr := jsapi.JSArray.New()
	for i := range recs {
		arr.Call("push", recordJS(&recs[i]))
	}
	return arr, nil
}

// idArg reads the id (or user) argument of retry, discard and login.
func idArg(where string, args []js.Value) (string, error) {
	id := jsapi.At(args, 0)
	if !jsapi.IsType(id, js.TypeString) || id.String() == "" {
		return "", jsapi.TypeErr("outbox."+where, "id must be a non-empty string")
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
	n, err := o.rt.Logout(bg, jsapi.Field(jsapi.At(args, 0), "purge").Truthy())
	return n, obErr(err)
}

func (o *outboxHandle) pause([]js.Value) (any, error) { return nil, obErr(o.rt.Pause(bg)) }

func (o *outboxHandle) resume([]js.Value) (any, error) { return nil, obErr(o.rt.Resume(bg)) }

func (o *outboxHandle) close([]js.Value) (any, error) {
	outboxes.Remove(o.id)
	return nil, o.rt.Close()
}
