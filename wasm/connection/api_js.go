//go:build js && wasm && !tabfence_core && !tabfence_noconnection

package connection

import (
	"context"
	"errors"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/realtime/browser"
	"github.com/tabfence/tabfence/wasm/jsapi"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// The methods of the object tf.connection returns, each a thin call of
// browser.Conn's; values cross as plain objects (values_js.go).

// connHandle is the Go state behind one connection object.
type connHandle struct {
	id   float64 // its handle in connections
	conn *browser.Conn
}

// connections are the page's connection objects: package state, as the
// objects are the page's, handed to its JavaScript by its one runtime.
var connections jsapi.Objects[*connHandle]

var bg = context.Background()

// errConnClosed is what a method of a closed connection object fails with.
var errConnClosed = &namedError{browser.ErrClosed, "InvalidStateError"}

func init() {
	type m = jsapi.Method[*connHandle]
	connections.Define(errConnClosed,
		m{Name: "mutate", Call: jsapi.Async, Fn: (*connHandle).mutate},
		m{Name: "pending", Call: jsapi.Async, Fn: (*connHandle).pending},
		m{Name: "read", Call: jsapi.Async, Fn: (*connHandle).read},
		m{Name: "onDelta", Call: jsapi.Sync, Fn: (*connHandle).onDelta},
		m{Name: "onReload", Call: jsapi.Sync, Fn: (*connHandle).onReload},
		m{Name: "onPending", Call: jsapi.Sync, Fn: (*connHandle).onPending},
		m{Name: "status", Call: jsapi.Sync, Fn: (*connHandle).status},
		m{Name: "onStatus", Call: jsapi.Sync, Fn: (*connHandle).onStatus},
		m{Name: "retry", Call: jsapi.Async, Fn: (*connHandle).retry},
		m{Name: "setOffline", Call: jsapi.Async, Fn: (*connHandle).setOffline},
		m{Name: "signOut", Call: jsapi.Async, Fn: (*connHandle).signOut},
		m{Name: "close", Call: jsapi.Async, Fn: (*connHandle).close, Idle: js.Undefined()},
	)
}

// mutate is connection.mutate({op, entity?, payload, id?}): it resolves
// with the ack, or rejects with a MutationRejectedError carrying the
// server's problem.
func (c *connHandle) mutate(args []js.Value) (any, error) {
	v := jsapi.At(args, 0)
	a := jsapi.MutationArgs{Mutation: jsapi.ArgOf(v)}
	var payload []byte
	if a.Mutation.Kind == jsapi.KindObject {
		a.Op, a.Entity, a.ID = jsapi.ArgOf(jsapi.Field(v, "op")), jsapi.ArgOf(jsapi.Field(v, "entity")), jsapi.ArgOf(jsapi.Field(v, "id"))
		payload, a.HasPayload = jsapi.PayloadBytes(jsapi.Field(v, "payload"))
	}
	m, err := jsapi.ValidateMutation(a)
	if err != nil {
		return nil, err
	}
	m.Payload = payload
	ack, err := c.conn.Mutate(bg, m)
	if rej, ok := errors.AsType[*browser.RejectError](err); ok {
		// A rejected promise as the value: the API's promise adopts it,
		// with the problem on the error (ToJS carries name and message only).
		e := jsglue.ToJS(connErr(err))
		e.Set("problem", problemJS(rej.Problem))
		return jsapi.JSPromise.Call("reject", e), nil
	}
	if err != nil {
		return nil, connErr(err)
	}
	return ackJS(ack), nil
}

func (c *connHandle) pending([]js.Value) (any, error) {
	list, err := c.conn.Pending(bg)
	if err != nil {
		return nil, connErr(err)
	}
	return pendingJS(list), nil
}

func (c *connHandle) read(args []js.Value) (any, error) {
	store, err := jsapi.RequiredString("connection.read", "store", jsapi.ArgOf(jsapi.At(args, 0)))
	if err != nil {
		return nil, err
	}
	recs, err := c.conn.Read(bg, store)
	if err != nil {
		return nil, connErr(err)
	}
	arr := jsapi.JSArray.New(len(recs))
	for i, r := range recs {
		o := jsapi.NewObject()
		o.Set("key", r.Key)
		o.Set("value", r.Value)
		arr.SetIndex(i, o)
	}
	return arr, nil
}

func (c *connHandle) onDelta(args []js.Value) (any, error) {
	fn, err := jsapi.CallbackArg("connection.onDelta", args)
	if err != nil {
		return nil, err
	}
	return jsapi.Unsubscriber(c.conn.OnDelta(func(d rt.Delta) { jsapi.CallLater(fn, deltaJS(d)) })), nil
}

func (c *connHandle) onReload(args []js.Value) (any, error) {
	fn, err := jsapi.CallbackArg("connection.onReload", args)
	if err != nil {
		return nil, err
	}
	return jsapi.Unsubscriber(c.conn.OnReload(func(version uint64) { jsapi.CallLater(fn, float64(version)) })), nil
}

func (c *connHandle) onPending(args []js.Value) (any, error) {
	fn, err := jsapi.CallbackArg("connection.onPending", args)
	if err != nil {
		return nil, err
	}
	return jsapi.Unsubscriber(c.conn.OnPending(func(list []browser.PendingMutation) { jsapi.CallLater(fn, pendingJS(list)) })), nil
}

func (c *connHandle) status([]js.Value) (any, error) { return connStatusJS(c.conn.Status()), nil }

func (c *connHandle) onStatus(args []js.Value) (any, error) {
	fn, err := jsapi.CallbackArg("connection.onStatus", args)
	if err != nil {
		return nil, err
	}
	return jsapi.Unsubscriber(c.conn.OnStatus(func(st browser.Status) { jsapi.CallLater(fn, connStatusJS(st)) })), nil
}

// retry asks the leader for its status. On its own goroutine (Async), as
// Conn.Retry posts on the channel and may wait for a lock: a JavaScript
// callback must never block.
func (c *connHandle) retry([]js.Value) (any, error) {
	c.conn.Retry()
	return js.Undefined(), nil
}

func (c *connHandle) setOffline(args []js.Value) (any, error) {
	v := jsapi.At(args, 0)
	if !jsapi.IsType(v, js.TypeBoolean) {
		return nil, jsapi.TypeErr("connection.setOffline", "offline must be a boolean")
	}
	return nil, connErr(c.conn.SetOffline(bg, v.Bool()))
}

func (c *connHandle) signOut([]js.Value) (any, error) {
	return nil, connErr(c.conn.SignOut(bg))
}

func (c *connHandle) close([]js.Value) (any, error) {
	connections.Remove(c.id)
	return nil, connErr(c.conn.Close(bg))
}
