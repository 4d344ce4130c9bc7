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

// election is the Go state behind one object returned by elect().
type election struct {
	e                            *locks.Election
	onLeader, onFollower, onLost js.Value
	fx                           *electFence // nil when unfenced (fence_js.go)

	mu    sync.Mutex
	cur   *locks.Leadership // the leadership curJS describes
	curJS js.Value
}

var (
	elections handles[*election]

	// The methods of every election object: one callback each, bound to
	// the election's handle (see jsapi_js.go).
	electIsLeader, electLeadership, electResign, electSteal, electClose, electHasLeader *jsglue.Callback
)

func registerElect(api js.Value) {
	electIsLeader = syncFunc(func(args []js.Value) (any, error) {
		el, ok := elections.get(args)
		return ok && el.e.IsLeader(), nil
	})
	electLeadership = syncFunc(func(args []js.Value) (any, error) {
		el, ok := elections.get(args)
		if !ok {
			return js.Null(), nil
		}
		l := el.e.Leadership()
		if l == nil || l.Ctx.Err() != nil {
			return js.Null(), nil
		}
		return el.ctxFor(l), nil
	})
	electResign = asyncFunc(func(args []js.Value) (any, error) {
		el, ok := elections.get(args)
		if !ok {
			return nil, locks.ErrClosed
		}
		return nil, el.e.Resign()
	})
	electSteal = asyncFunc(func(args []js.Value) (any, error) {
		el, ok := elections.get(args)
		if !ok {
			return nil, locks.ErrClosed
		}
		l, err := el.e.Steal(context.Background())
		if err != nil {
			return nil, err
		}
		return el.ctxFor(l), nil
	})
	electHasLeader = asyncFunc(func(args []js.Value) (any, error) {
		el, ok := elections.get(args)
		if !ok {
			return nil, locks.ErrClosed
		}
		return el.e.HasLeader(context.Background())
	})
	electClose = asyncFunc(func(args []js.Value) (any, error) {
		el, ok := elections.get(args)
		if !ok {
			return nil, nil // closing twice is fine
		}
		elections.remove(args[0].Float())
		if err := el.e.Close(); err != nil {
			return nil, err
		}
		// Resolve once the lock is released and onLost("closed") was
		// delivered, so `await close()` means the next tab can lead.
		<-el.e.Done()
		el.releaseFenced()
		return nil, nil
	})
	api.Set("elect", syncFunc(elect).Value)
	api.Set("lockName", syncFunc(lockName).Value)
}

// elect validates its options, starts an election and returns its object.
// It never waits: the tab joins the lock's queue and the callbacks report
// what happens.
func elect(args []js.Value) (any, error) {
	opts := js.Undefined()
	if len(args) > 0 {
		opts = args[0]
	}
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
	stall, err := stallAfterArg("elect", boolArg(field(opts, "stallAfter")), el.fx != nil)
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
	id := elections.add(el)

	obj := newObject()
	defineConst(obj, "scope", o.Scope)
	defineConst(obj, "protocol", o.Protocol)
	defineConst(obj, "lockName", e.LockName())
	defineGetter(obj, "isLeader", bound(electIsLeader, id))
	defineGetter(obj, "leadership", bound(electLeadership, id))
	defineConst(obj, "resign", bound(electResign, id))
	defineConst(obj, "steal", bound(electSteal, id))
	defineConst(obj, "hasLeader", bound(electHasLeader, id))
	defineConst(obj, "close", bound(electClose, id))
	defineConst(obj, "fenced", el.fx != nil)
	defineConst(obj, "stallAfter", float64(stall/time.Millisecond))
	if electFenceCB != nil { // fence_js.go registered (not in elect-only tests)
		defineConst(obj, "fence", bound(electFenceCB, id))
		defineConst(obj, "channel", bound(electChannelCB, id))
	}

	if err := e.Start(); err != nil {
		elections.remove(id)
		return nil, err
	}
	el.startFenced()
	return obj, nil
}

// lockName(scope, protocol) returns the Web Lock name an election uses, so
// pages and tests can inspect navigator.locks.query() or hold it by hand.
func lockName(args []js.Value) (any, error) {
	const where = "lockName"
	a := make([]js.Value, 2)
	copy(a, args)
	scope, err := requiredString(where, "scope", argOf(a[0]))
	if err != nil {
		return nil, err
	}
	protocol, err := protocolArg(where, argOf(a[1]))
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
		el.fx.decorate(o, el, l) // apply, post (fence_js.go)
		jsObject.Call("freeze", o)
		el.cur, el.curJS = l, o
	}
	return el.curJS
}
