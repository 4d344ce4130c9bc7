//go:build js && wasm

package main

import (
	"strconv"
	"sync"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/internal/deadline"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/jsglue/loader"
	"github.com/tabfence/tabfence/locks"
)

// The channel() area of the API: fenced messages between the tabs of one
// browser over a BroadcastChannel (package channel). Only a current fenced
// leader posts; every message carries its token and a sequence per leader
// context; receivers deliver only fresh messages (drop older tokens,
// replays and garbage, counted per reason) and flag gaps.
//
// Besides the app's subscribers, every channel of the page watches for a
// token newer than a leadership this page holds on the same resource: that
// leader is stale. Before stepping down it checks the token against the
// allocation record in IndexedDB (tf_epochs), so a script that forges a
// higher token on the channel cannot depose the real leader.

var (
	chans handles[*chanState]

	chanPost, chanSubscribe, chanUnsub, chanStats, chanReplay, chanSeed, chanClose *jsglue.Callback
)

type chanState struct {
	name    string
	c       *channel.Channel
	el      *election // the election it was opened from, or nil
	deliver js.Value  // the loader's deliver hook, or undefined
	held    js.Value  // the loader's deliverHeld hook, or undefined

	mu      sync.Mutex
	subs    map[float64]func()
	nextSub float64
	closed  bool
}

func registerChannel(api js.Value) {
	chanPost = promiseFunc(func(args []js.Value) (any, error) {
		cs, ok := chans.get(args)
		if !ok {
			return nil, channel.ErrClosed
		}
		el, l, err := cs.leader()
		if err != nil {
			return nil, err
		}
		a := padArgs(args[1:], 2)
		return cs.post("channel.post", el, l, a[0], a[1])
	})
	chanSubscribe = syncFunc(func(args []js.Value) (any, error) {
		cs, ok := chans.get(args)
		if !ok {
			return nil, channel.ErrClosed
		}
		a := padArgs(args[1:], 1)
		if _, err := optionalFunc("channel.subscribe", "fn", argOf(a[0])); err != nil || a[0].Type() != js.TypeFunction {
			return nil, typeErr("channel.subscribe", "expects a function")
		}
		fn := a[0]
		cs.mu.Lock()
		defer cs.mu.Unlock()
		if cs.closed {
			return nil, channel.ErrClosed
		}
		cs.nextSub++
		id := cs.nextSub
		// Delivery never blocks (the call is a microtask): the message
		// handler calls it directly.
		deliver, held, c := cs.deliver, cs.held, cs.c
		cs.subs[id] = cs.c.SubscribeNow(func(m channel.Message) {
			if deliver.IsUndefined() {
				callLater(fn, messageJS(m))
				return
			}
			// The envelope the loader is handing over: it builds the
			// message itself, nothing of m crosses again.
			if !held.IsUndefined() && c.Held(m) {
				if _, err := jsglue.Invoke(held, fn, m.Gap); err != nil {
					reportError("tabfence: channel delivery:", err)
				}
				return
			}
			// The loader's deliver hook: one call, no object or string made
			// from Go.
			var b [256]byte
			if err := loader.CallText(deliver, fn, appendMessageJSON(b[:0], m), m.Payload); err != nil {
				reportError("tabfence: channel delivery:", err)
			}
		})
		return chanUnsub.Value.Call("bind", nil, args[0], id), nil
	})
	chanUnsub = syncFunc(func(args []js.Value) (any, error) {
		cs, ok := chans.get(args)
		if !ok || len(args) < 2 || args[1].Type() != js.TypeNumber {
			return nil, nil
		}
		cs.mu.Lock()
		un := cs.subs[args[1].Float()]
		delete(cs.subs, args[1].Float())
		cs.mu.Unlock()
		if un != nil {
			un()
		}
		return nil, nil
	})
	chanStats = syncFunc(func(args []js.Value) (any, error) {
		cs, ok := chans.get(args)
		if !ok {
			return nil, channel.ErrClosed
		}
		return statsJS(cs.c.Stats()), nil
	})
	chanReplay = syncFunc(func(args []js.Value) (any, error) {
		cs, ok := chans.get(args)
		if !ok {
			return nil, channel.ErrClosed
		}
		cs.c.Replay()
		return nil, nil
	})
	chanSeed = syncFunc(func(args []js.Value) (any, error) {
		cs, ok := chans.get(args)
		if !ok {
			return nil, channel.ErrClosed
		}
		const where = "channel.seed"
		a := padArgs(args[1:], 3)
		res, err := requiredString(where, "resource", argOf(a[0]))
		if err != nil {
			return nil, err
		}
		tok, err := intArg(where, "token", argOf(a[1]), 0, false)
		if err != nil {
			return nil, err
		}
		seq, err := intArg(where, "seq", argOf(a[2]), 0, true)
		if err != nil {
			return nil, err
		}
		cs.c.Seed(res, tok, seq)
		pageGuard.Advance(res, tok)
		return nil, nil
	})
	chanClose = syncFunc(func(args []js.Value) (any, error) {
		cs, ok := chans.get(args)
		if !ok {
			return nil, nil
		}
		chans.remove(args[0].Float())
		cs.close()
		return nil, nil
	})
	api.Set("channel", syncFunc(func(args []js.Value) (any, error) {
		a := padArgs(args, 2)
		name, err := requiredString("channel", "name", argOf(a[0]))
		if err != nil {
			return nil, err
		}
		return openChannel("channel", name, a[1], nil)
	}).Value)
}

// openChannel opens a channel object; opts may hold {buffer: true}.
func openChannel(where, name string, opts js.Value, el *election) (any, error) {
	if t, _ := typeOf(opts); !opts.IsUndefined() && !opts.IsNull() && t != js.TypeObject {
		return nil, typeErr(where, "options must be an object when given")
	}
	buf := boolArg(field(opts, "buffer"))
	if !buf.absent() && buf.Kind != kindBoolean {
		return nil, typeErr(where, "buffer must be a boolean when given")
	}
	cs, err := newChanState(name, buf.Num != 0, el)
	if err != nil {
		return nil, err
	}
	id := chans.add(cs)
	obj := newObject()
	defineConst(obj, "name", name)
	defineConst(obj, "post", postMethod(opChanPost, id, bound(chanPost, id)))
	defineConst(obj, "subscribe", bound(chanSubscribe, id))
	defineConst(obj, "stats", bound(chanStats, id))
	defineConst(obj, "replay", bound(chanReplay, id))
	defineConst(obj, "seed", bound(chanSeed, id))
	defineConst(obj, "close", bound(chanClose, id))
	return obj, nil
}

func newChanState(name string, buffer bool, el *election) (*chanState, error) {
	var opts []channel.Option
	if buffer {
		opts = append(opts, channel.Buffered())
	}
	c, err := channel.Open(name, opts...)
	if err != nil {
		return nil, err
	}
	cs := &chanState{name: name, c: c, el: el, subs: map[float64]func(){}}
	cs.deliver, cs.held = c.Deliverers()
	c.SubscribeNow(cs.observe) // never blocks: it starts goroutines to verify
	return cs, nil
}

func (cs *chanState) close() {
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		return
	}
	cs.closed = true
	subs := cs.subs
	cs.subs = nil
	cs.mu.Unlock()
	for _, un := range subs {
		un()
	}
	_ = cs.c.Close()
}

// leader is the leadership a post speaks for: the bound election's, or the
// leading fenced election of this page whose lock name is the channel name.
func (cs *chanState) leader() (*election, *locks.Leadership, error) {
	if el := cs.el; el != nil {
		return el, el.e.Leadership(), nil
	}
	fencedMu.Lock()
	defer fencedMu.Unlock()
	for _, el := range fencedElections {
		if el.e.LockName() != cs.name {
			continue
		}
		if l := el.e.Leadership(); l != nil {
			return el, l, nil
		}
	}
	return nil, nil, nil
}

// post sends kind/payload under leadership l (sequence per leadership).
func (cs *chanState) post(where string, el *election, l *locks.Leadership, kindV, payload js.Value) (any, error) {
	// A kind is usually one of a few recurring strings: a cached one is
	// known valid and needs no copy.
	kind, known := recurring.lookup(kindV)
	if !known {
		var err error
		if kind, err = requiredString(where, "kind", argOf(kindV)); err != nil {
			return nil, err
		}
	}
	if !known && len(kind) <= channel.DefaultLimits.MaxKind {
		recurring.get(kind) // remember it for the next post
	}
	e, err := cs.send(where, el, l, kind, payload)
	if err != nil {
		return nil, err
	}
	return jsJSONParse.Invoke(string(postResult(make([]byte, 0, 96), e))), nil
}

// send posts kind (a string already) and payload under leadership l.
func (cs *chanState) send(where string, el *election, l *locks.Leadership, kind string, payload js.Value) (channel.Envelope, error) {
	if len(kind) > channel.DefaultLimits.MaxKind {
		return channel.Envelope{}, typeErr(where, "kind is longer than "+itoa(channel.DefaultLimits.MaxKind)+" bytes")
	}
	if el == nil || l == nil || l.Ctx.Err() != nil {
		return channel.Envelope{}, &NotLeaderError{"tabfence: " + where + ": this tab does not lead " + cs.name + "; only the current leader posts"}
	}
	if el.fx == nil || l.Token == 0 {
		return channel.Envelope{}, &NotLeaderError{"tabfence: " + where + ": the election is not fenced (token 0); elect with fenced: true to post"}
	}
	return cs.c.Send(el.fx.sequencer(l, cs.name), kind, payload)
}

// postResult appends what post resolves to, {id, token, seq}, as JSON.
func postResult(b []byte, e channel.Envelope) []byte {
	b = channel.AppendJSONField(b, `{"id":`, e.ID)
	b = channel.AppendUintField(b, `,"token":`, e.Token)
	b = channel.AppendUintField(b, `,"seq":`, e.Seq)
	return append(b, '}')
}

// observe runs for every fresh message: advance the page's guard, and
// step down a leadership of this page that a newer, genuine token
// superseded.
func (cs *chanState) observe(m channel.Message) {
	pageGuard.Advance(m.Resource, m.Token)
	type stale struct {
		el *election
		l  *locks.Leadership
	}
	var ss []stale
	fencedMu.Lock()
	for _, el := range fencedElections {
		if l := el.e.Leadership(); l != nil && l.Resource == m.Resource && l.Token != 0 && l.Token < m.Token {
			ss = append(ss, stale{el, l})
		}
	}
	fencedMu.Unlock()
	for _, s := range ss {
		go verifyNewer(s.el, s.l, m.Envelope)
	}
}

// verifyNewer steps l down if the token heard was really allocated: the
// resource's epoch in IndexedDB is at least that token. A forged token
// (higher than any allocated) is reported and ignored.
func verifyNewer(el *election, l *locks.Leadership, e channel.Envelope) {
	ctx, cancel := deadline.WithTimeout(l.Ctx, 10*time.Second)
	defer cancel()
	db, err := el.fx.st.open(ctx)
	if err != nil {
		return
	}
	rec, err := db.Epoch(ctx, l.Resource)
	if err != nil {
		return
	}
	tok := strconv.FormatUint(e.Token, 10)
	if rec.Epoch < e.Token {
		jsConsole.Call("warn", "tabfence: ignored a message claiming token "+tok+" for "+l.Resource+
			" (owner "+e.Owner+"): no such token was allocated; a script on this origin forged it")
		return
	}
	l.StepDown(&StaleError{"tabfence: heard token " + tok + " for " + l.Resource + " on the channel (owner " + e.Owner +
		"): a newer leader exists; this leadership has token " + strconv.FormatUint(l.Token, 10)})
}

// messageJS is a delivered message as handed to subscribers: one
// JSON.parse of its fields (messageJSON) and one property write for the
// payload, which keeps its place in the field order.
func messageJS(m channel.Message) js.Value {
	o := jsJSONParse.Invoke(messageJSON(m))
	o.Set("payload", m.Payload)
	return o
}

// messageJSON is a message's fields as JSON, with "payload": null in the
// payload's place.
func messageJSON(m channel.Message) string {
	return string(appendMessageJSON(make([]byte, 0, 256), m))
}

// appendMessageJSON appends messageJSON(m) to b.
func appendMessageJSON(b []byte, m channel.Message) []byte {
	b = channel.AppendJSONField(b, `{"id":`, m.ID)
	b = channel.AppendJSONField(b, `,"kind":`, m.Kind)
	b = channel.AppendUintField(b, `,"payload":null,"token":`, m.Token)
	b = channel.AppendUintField(b, `,"seq":`, m.Seq)
	b = channel.AppendJSONField(b, `,"resource":`, m.Resource)
	b = channel.AppendJSONField(b, `,"owner":`, m.Owner)
	b = channel.AppendUintField(b, `,"sentAt":`, uint64(m.SentAt))
	b = append(b, `,"gap":`...)
	b = strconv.AppendBool(b, m.Gap)
	return append(b, '}')
}

// jsJSONParse is called with Invoke (JSON.parse ignores this): no method
// name to decode per call.
var jsJSONParse = js.Global().Get("JSON").Get("parse")

func statsJS(s channel.Stats) js.Value {
	o := newObject()
	o.Set("received", float64(s.Received))
	o.Set("delivered", float64(s.Delivered))
	o.Set("gaps", float64(s.Gaps))
	d := newObject()
	var total uint64
	for _, r := range channel.Reasons() {
		n := s.DroppedBy(r)
		total += n
		d.Set(r.String(), float64(n))
	}
	o.Set("dropped", d)
	o.Set("droppedTotal", float64(total))
	return o
}

// promiseFunc exports fn, which never blocks, as a function returning a
// settled Promise: it runs in the JavaScript call itself. asyncFunc's
// goroutine costs a later turn of the event loop (about 0.3 ms measured),
// which a channel round trip pays twice.
func promiseFunc(fn func(args []js.Value) (any, error)) *jsglue.Callback {
	cb := syncFunc(func(args []js.Value) (ret any, err error) {
		v, err := fn(args)
		if err != nil {
			return jsPromise.Call("reject", jsglue.ToJS(err)), nil
		}
		return jsPromiseResolve.Invoke(v), nil
	})
	jsReflect.Call("set", cb.Value, symAsync, true)
	return cb
}

var (
	jsPromise = js.Global().Get("Promise")
	// Promise.resolve bound to Promise, called with Invoke: no method name
	// decoded per post.
	jsPromiseResolve = jsPromise.Get("resolve").Call("bind", jsPromise)
)
