//go:build js && wasm

package main

import (
	"context"
	"sync"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/wasm/jsapi"
)

// The elect() area of the API: leader election among the tabs of one
// browser on a Web Lock (package locks), with its events and leader
// contexts handed to JavaScript.

// election is the Go state behind one object returned by elect(); its
// methods below are the object's (electMethods).
type election struct {
	id                           float64 // its handle in elections
	e                            *locks.Election
	onLeader, onFollower, onLost js.Value
	fx                           *electFence // nil when unfenced (leader_js.go)

	mu    sync.Mutex
	cur   *locks.Leadership // the leadership curJS describes
	curJS js.Value
}

// elections are the page's election objects (see objects).
var elections objects[*election]

func init() {
	elections.Define(locks.ErrClosed,
		jsapi.Method[*election]{Name: "isLeader", Call: jsapi.Getter, Fn: (*election).isLeader, Idle: false},
		jsapi.Method[*election]{Name: "leadership", Call: jsapi.Getter, Fn: (*election).leadership, Idle: js.Null()},
		jsapi.Method[*election]{Name: "resign", Call: jsapi.Async, Fn: (*election).resign},
		jsapi.Method[*election]{Name: "steal", Call: jsapi.Async, Fn: (*election).steal},
		jsapi.Method[*election]{Name: "hasLeader", Call: jsapi.Async, Fn: (*election).hasLeader},
		jsapi.Method[*election]{Name: "close", Call: jsapi.Async, Fn: (*election).close, Idle: js.Undefined()},
		jsapi.Method[*election]{Name: "fence", Call: jsapi.Sync, Fn: (*election).fence},     // leader_js.go
		jsapi.Method[*election]{Name: "channel", Call: jsapi.Sync, Fn: (*election).channel}, // leader_js.go
	)
}

func (el *election) isLeader([]js.Value) (any, error) { return el.e.IsLeader(), nil }

func (el *election) leadership([]js.Value) (any, error) {
	l := el.e.Leadership()
	if l == nil || l.Ctx.Err() != nil {
		return js.Null(), nil
	}
	return el.ctxFor(l), nil
}

func (el *election) resign([]js.Value) (any, error) { return nil, el.e.Resign() }

func (el *election) steal([]js.Value) (any, error) {
	l, err := el.e.Steal(context.Background())
	if err != nil {
		return nil, err
	}
	return el.ctxFor(l), nil
}

func (el *election) hasLeader([]js.Value) (any, error) {
	return el.e.HasLeader(context.Background())
}

// close resolves once the lock is released and onLost("closed") was
// delivered, so `await close()` means the next tab can lead.
func (el *election) close([]js.Value) (any, error) {
	elections.Remove(el.id)
	if err := el.e.Close(); err != nil {
		return nil, err
	}
	<-el.e.Done()
	el.releaseFenced()
	return nil, nil
}

// elect validates its options, starts an election and returns its object.
// It never waits: the tab joins the lock's queue and the callbacks report
// what happens.
func elect(args []js.Value) (any, error) {
	opts := jsapi.At(args, 0)
	o, err := jsapi.ValidateElect(jsapi.ElectArgs{
		Options:    jsapi.ArgOf(opts),
		Scope:      jsapi.ArgOf(jsapi.Field(opts, "scope")),
		Protocol:   jsapi.ArgOf(jsapi.Field(opts, "protocol")),
		Resource:   jsapi.ArgOf(jsapi.Field(opts, "resource")),
		OwnerID:    jsapi.ArgOf(jsapi.Field(opts, "ownerID")),
		OnLeader:   jsapi.ArgOf(jsapi.Field(opts, "onLeader")),
		OnFollower: jsapi.ArgOf(jsapi.Field(opts, "onFollower")),
		OnLost:     jsapi.ArgOf(jsapi.Field(opts, "onLost")),
	})
	if err != nil {
		return nil, err
	}
	el := &election{
		onLeader:   jsapi.Field(opts, "onLeader"),
		onFollower: jsapi.Field(opts, "onFollower"),
		onLost:     jsapi.Field(opts, "onLost"),
	}
	fencer, err := setupFenced(el, opts)
	if err != nil {
		return nil, err
	}
	stall, err := jsapi.StallAfterArg("elect", jsapi.ArgOf(jsapi.Field(opts, "stallAfter")), el.fx != nil)
	if err != nil {
		return nil, err
	}
	e, err := locks.NewElection(locks.Config{
		StallAfter: stall,
		Fencer:     fencer,
		Scope:      o.Scope,
		Protocol:   o.Protocol,
		Resource:   o.Resource,
		OwnerID:    o.OwnerID,
		OnLeader:   el.leader,
		OnFollower: el.follower,
		OnLost:     el.lost,
	})
	if err != nil {
		return nil, err
	}
	el.e = e
	el.id = elections.Add(el)

	obj := jsapi.NewObject()
	jsapi.DefineConst(obj, "scope", o.Scope)
	jsapi.DefineConst(obj, "protocol", o.Protocol)
	jsapi.DefineConst(obj, "lockName", e.LockName())
	jsapi.DefineConst(obj, "fenced", el.fx != nil)
	jsapi.DefineConst(obj, "stallAfter", float64(stall/time.Millisecond))
	elections.Install(obj, el.id)

	if err := e.Start(); err != nil {
		elections.Remove(el.id)
		return nil, err
	}
	el.startFenced()
	return obj, nil
}

// lockName(scope, protocol) returns the Web Lock name an election uses, so
// pages and tests can inspect navigator.locks.query() or hold it by hand.
func lockName(args []js.Value) (any, error) {
	const where = "lockName"
	scope, err := jsapi.RequiredString(where, "scope", jsapi.ArgOf(jsapi.At(args, 0)))
	if err != nil {
		return nil, err
	}
	protocol, err := jsapi.ProtocolArg(where, jsapi.ArgOf(jsapi.At(args, 1)))
	if err != nil {
		return nil, err
	}
	name, err := locks.Name(scope, protocol)
	if err != nil {
		return nil, jsapi.TypeErr(where, err.Error())
	}
	return name, nil
}

// leader, follower and lost are the locks callbacks; each hands the event to
// the page's callback in a microtask (see callLater).
func (el *election) leader(l *locks.Leadership) { jsapi.CallLater(el.onLeader, el.ctxFor(l)) }

func (el *election) follower() { jsapi.CallLater(el.onFollower) }

func (el *election) lost(reason locks.Reason, err error) {
	if err == nil { // locks always gives a *LostError; keep the promise of the d.ts anyway
		err = &locks.LostError{Reason: reason}
	}
	name, err := el.fx.lostReason(reason.String(), err) // "deleted"/"upgraded" when the database went away
	jsapi.CallLater(el.onLost, name, jsglue.ToJS(err))
}

// ctxFor returns the JavaScript leader context of l, the same object for the
// same leadership (onLeader's argument, steal()'s result and the leadership
// getter agree), or null when l is nil or over. Its signal aborts when
// l.Ctx ends, whatever the reason: resign, close, steal, fencing, tab
// shutdown.
func (el *election) ctxFor(l *locks.Leadership) js.Value {
	if l == nil {
		return js.Null()
	}
	el.mu.Lock()
	defer el.mu.Unlock()
	if el.cur != l {
		// No stop: the leadership context always ends (at the latest on
		// close), and that ends the watch.
		signal, _ := jsglue.Signal(l.Ctx)
		o := jsapi.NewObject()
		o.Set("signal", signal)
		o.Set("lockName", l.LockName)
		o.Set("resource", l.Resource)
		o.Set("ownerID", l.OwnerID)
		o.Set("token", float64(l.Token)) // tokens stay below 2^53 (wire.MaxToken)
		o.Set("generation", l.Generation)
		o.Set("startedAt", float64(l.StartedAt.UnixNano())/1e6)
		el.fx.decorate(o, el, l) // apply, post (leader_js.go)
		jsapi.JSObject.Call("freeze", o)
		el.cur, el.curJS = l, o
	}
	return el.curJS
}
