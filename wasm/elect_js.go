//go:build js && wasm

package main

import (
	"context"
	"sync"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/locks"
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
	elections.define(locks.ErrClosed,
		method[*election]{name: "isLeader", call: getterCall, fn: (*election).isLeader, idle: false},
		method[*election]{name: "leadership", call: getterCall, fn: (*election).leadership, idle: js.Null()},
		method[*election]{name: "resign", call: asyncCall, fn: (*election).resign},
		method[*election]{name: "steal", call: asyncCall, fn: (*election).steal},
		method[*election]{name: "hasLeader", call: asyncCall, fn: (*election).hasLeader},
		method[*election]{name: "close", call: asyncCall, fn: (*election).close, idle: js.Undefined()},
		method[*election]{name: "fence", call: syncCall, fn: (*election).fence},     // leader_js.go
		method[*election]{name: "channel", call: syncCall, fn: (*election).channel}, // leader_js.go
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
	elections.remove(el.id)
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
	opts := at(args, 0)
	o, err := validateElect(electArgs{
		Options:    argOf(opts),
		Scope:      argOf(field(opts, "scope")),
		Protocol:   argOf(field(opts, "protocol")),
		Resource:   argOf(field(opts, "resource")),
		OwnerID:    argOf(field(opts, "ownerID")),
		OnLeader:   argOf(field(opts, "onLeader")),
		OnFollower: argOf(field(opts, "onFollower")),
		OnLost:     argOf(field(opts, "onLost")),
	})
	if err != nil {
		return nil, err
	}
	el := &election{
		onLeader:   field(opts, "onLeader"),
		onFollower: field(opts, "onFollower"),
		onLost:     field(opts, "onLost"),
	}
	fencer, err := setupFenced(el, opts)
	if err != nil {
		return nil, err
	}
	stall, err := stallAfterArg("elect", argOf(field(opts, "stallAfter")), el.fx != nil)
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
	el.id = elections.add(el)

	obj := newObject()
	defineConst(obj, "scope", o.Scope)
	defineConst(obj, "protocol", o.Protocol)
	defineConst(obj, "lockName", e.LockName())
	defineConst(obj, "fenced", el.fx != nil)
	defineConst(obj, "stallAfter", float64(stall/time.Millisecond))
	elections.install(obj, el.id)

	if err := e.Start(); err != nil {
		elections.remove(el.id)
		return nil, err
	}
	el.startFenced()
	return obj, nil
}

// lockName(scope, protocol) returns the Web Lock name an election uses, so
// pages and tests can inspect navigator.locks.query() or hold it by hand.
func lockName(args []js.Value) (any, error) {
	const where = "lockName"
	scope, err := requiredString(where, "scope", argOf(at(args, 0)))
	if err != nil {
		return nil, err
	}
	protocol, err := protocolArg(where, argOf(at(args, 1)))
	if err != nil {
		return nil, err
	}
	name, err := locks.Name(scope, protocol)
	if err != nil {
		return nil, typeErr(where, err.Error())
	}
	return name, nil
}

// leader, follower and lost are the locks callbacks; each hands the event to
// the page's callback in a microtask (see callLater).
func (el *election) leader(l *locks.Leadership) { callLater(el.onLeader, el.ctxFor(l)) }

func (el *election) follower() { callLater(el.onFollower) }

func (el *election) lost(reason locks.Reason, err error) {
	if err == nil { // locks always gives a *LostError; keep the promise of the d.ts anyway
		err = &locks.LostError{Reason: reason}
	}
	name, err := el.fx.lostReason(reason.String(), err) // "deleted"/"upgraded" when the database went away
	callLater(el.onLost, name, jsglue.ToJS(err))
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
		o := newObject()
		o.Set("signal", signal)
		o.Set("lockName", l.LockName)
		o.Set("resource", l.Resource)
		o.Set("ownerID", l.OwnerID)
		o.Set("token", float64(l.Token)) // tokens stay below 2^53 (wire.MaxToken)
		o.Set("generation", l.Generation)
		o.Set("startedAt", float64(l.StartedAt.UnixNano())/1e6)
		el.fx.decorate(o, el, l) // apply, post (leader_js.go)
		jsObject.Call("freeze", o)
		el.cur, el.curJS = l, o
	}
	return el.curJS
}
