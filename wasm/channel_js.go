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
	"github.com/tabfence/tabfence/wasm/jsapi"
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

// chanState is the Go state behind one channel object; its methods below
// are the object's (chans).
type chanState struct {
	id      float64 // its handle in chans (0 for an election's own channel)
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

// chans are the page's channel objects (see objects).
var chans objects[*chanState]

// chanUnsubscribe is the row of the unsubscribe function subscribe returns.
const chanUnsubscribe = 0

func init() {
	chans.Define(channel.ErrClosed,
		jsapi.Method[*chanState]{Name: "unsubscribe", Call: jsapi.Sync, Fn: (*chanState).unsubscribe, Idle: js.Undefined(), Detached: true},
		jsapi.Method[*chanState]{Name: "post", Call: jsapi.Promise, Fn: (*chanState).postMethod, Wrap: func(id float64, m js.Value) js.Value {
			return postMethod(opChanPost, id, m)
		}},
		jsapi.Method[*chanState]{Name: "subscribe", Call: jsapi.Sync, Fn: (*chanState).subscribe},
		jsapi.Method[*chanState]{Name: "stats", Call: jsapi.Sync, Fn: (*chanState).stats},
		jsapi.Method[*chanState]{Name: "replay", Call: jsapi.Sync, Fn: (*chanState).replay},
		jsapi.Method[*chanState]{Name: "seed", Call: jsapi.Sync, Fn: (*chanState).seed},
		jsapi.Method[*chanState]{Name: "close", Call: jsapi.Sync, Fn: (*chanState).closeMethod, Idle: js.Undefined()},
	)
}

// channelFn is channel(name, {buffer}).
func channelFn(args []js.Value) (any, error) {
	name, err := jsapi.RequiredString("channel", "name", jsapi.ArgOf(jsapi.At(args, 0)))
	if err != nil {
		return nil, err
	}
	return openChannel("channel", name, jsapi.At(args, 1), nil)
}

// openChannel opens a channel object; opts may hold {buffer: true}.
func openChannel(where, name string, opts js.Value, el *election) (any, error) {
	if a := jsapi.ArgOf(opts); !a.Absent() && a.Kind != jsapi.KindObject {
		return nil, jsapi.TypeErr(where, "options must be an object when given")
	}
	buf := jsapi.ArgOf(jsapi.Field(opts, "buffer"))
	if !buf.Absent() && buf.Kind != jsapi.KindBoolean {
		return nil, jsapi.TypeErr(where, "buffer must be a boolean when given")
	}
	cs, err := newChanState(name, buf.Num != 0, el)
	if err != nil {
		return nil, err
	}
	cs.id = chans.Add(cs)
	obj := jsapi.NewObject()
	jsapi.DefineConst(obj, "name", name)
	chans.Install(obj, cs.id)
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

func (cs *chanState) postMethod(args []js.Value) (any, error) {
	el, l, err := cs.leader()
	if err != nil {
		return nil, err
	}
	return cs.post("channel.post", el, l, jsapi.At(args, 0), jsapi.At(args, 1))
}

func (cs *chanState) subscribe(args []js.Value) (any, error) {
	fn := jsapi.At(args, 0)
	if !jsapi.IsType(fn, js.TypeFunction) {
		return nil, jsapi.TypeErr("channel.subscribe", "expects a function")
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, channel.ErrClosed
	}
	cs.nextSub++
	id := cs.nextSub
	cs.subs[id] = cs.c.SubscribeNow(func(m channel.Message) { cs.deliverTo(fn, m) })
	return chans.Bind(chanUnsubscribe, cs.id, id), nil
}

// deliverTo hands m to the subscriber fn. It never blocks (the call is a
// microtask): the message handler calls it directly.
func (cs *chanState) deliverTo(fn js.Value, m channel.Message) {
	if cs.deliver.IsUndefined() {
		jsapi.CallLater(fn, messageJS(m))
		return
	}
	// The envelope the loader is handing over: it builds the message
	// itself, nothing of m crosses again.
	if !cs.held.IsUndefined() && cs.c.Held(m) {
		if _, err := jsglue.Invoke(cs.held, fn, m.Gap); err != nil {
			jsapi.ReportError("tabfence: channel delivery:", err)
		}
		return
	}
	// The loader's deliver hook: one call, no object or string made from Go.
	var b [256]byte
	if err := loader.CallText(cs.deliver, fn, appendMessageJSON(b[:0], m), m.Payload); err != nil {
		jsapi.ReportError("tabfence: channel delivery:", err)
	}
}

func (cs *chanState) unsubscribe(args []js.Value) (any, error) {
	sub := jsapi.At(args, 0)
	if sub.Type() != js.TypeNumber {
		return nil, nil
	}
	cs.mu.Lock()
	un := cs.subs[sub.Float()]
	delete(cs.subs, sub.Float())
	cs.mu.Unlock()
	if un != nil {
		un()
	}
	return nil, nil
}

func (cs *chanState) stats([]js.Value) (any, error) { return statsJS(cs.c.Stats()), nil }

func (cs *chanState) replay([]js.Value) (any, error) {
	cs.c.Replay()
	return nil, nil
}

func (cs *chanState) seed(args []js.Value) (any, error) {
	const where = "channel.seed"
	res, err := jsapi.RequiredString(where, "resource", jsapi.ArgOf(jsapi.At(args, 0)))
	if err != nil {
		return nil, err
	}
	tok, err := jsapi.IntArg(where, "token", jsapi.ArgOf(jsapi.At(args, 1)), 0, false)
	if err != nil {
		return nil, err
	}
	seq, err := jsapi.IntArg(where, "seq", jsapi.ArgOf(jsapi.At(args, 2)), 0, true)
	if err != nil {
		return nil, err
	}
	cs.c.Seed(res, tok, seq)
	pageGuard.Advance(res, tok)
	return nil, nil
}

func (cs *chanState) closeMethod([]js.Value) (any, error) {
	chans.Remove(cs.id)
	cs.close()
	return nil, nil
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
	kind, known := jsapi.Recurring.Lookup(kindV)
	if !known {
		var err error
		if kind, err = jsapi.RequiredString(where, "kind", jsapi.ArgOf(kindV)); err != nil {
			return nil, err
		}
	}
	if !known && len(kind) <= channel.DefaultLimits.MaxKind {
		jsapi.Recurring.Get(kind) // remember it for the next post
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
		return channel.Envelope{}, jsapi.TypeErr(where, "kind is longer than "+strconv.Itoa(channel.DefaultLimits.MaxKind)+" bytes")
	}
	if el == nil || l == nil || l.Ctx.Err() != nil {
		return channel.Envelope{}, &NotLeaderError{"tabfence: " + where + ": this tab does not lead " + cs.name + "; only the current leader posts"}
	}
	if el.fx == nil || l.Token == 0 {
		return channel.Envelope{}, &NotLeaderError{"tabfence: " + where + ": the election is not fenced (token 0); elect with fenced: true to post"}
	}
	return cs.c.Send(el.fx.sequencer(l, cs.name), kind, payload)
}

// observe runs for every fresh message: advance the page's guard, and
// step down a leadership of this page that a newer, genuine token
// superseded.
func (cs *chanState) observe(m channel.Message) {
	pageGuard.Advance(m.Resource, m.Token)
	for _, s := range fencedLeaderships(func(l *locks.Leadership) bool { return l.Resource == m.Resource && l.Token < m.Token }) {
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
		jsapi.JSConsole.Call("warn", "tabfence: ignored a message claiming token "+tok+" for "+l.Resource+
			" (owner "+e.Owner+"): no such token was allocated; a script on this origin forged it")
		return
	}
	l.StepDown(&StaleError{"tabfence: heard token " + tok + " for " + l.Resource + " on the channel (owner " + e.Owner +
		"): a newer leader exists; this leadership has token " + strconv.FormatUint(l.Token, 10)})
}

// messageJS is a delivered message as handed to subscribers: one
// JSON.parse of its fields (appendMessageJSON) and one property write for
// the payload, which keeps its place in the field order.
func messageJS(m channel.Message) js.Value {
	o := jsJSONParse.Invoke(string(appendMessageJSON(make([]byte, 0, 256), m)))
	o.Set("payload", m.Payload)
	return o
}

// jsJSONParse is called with Invoke (JSON.parse ignores this): no method
// name to decode per call.
var jsJSONParse = js.Global().Get("JSON").Get("parse")

func statsJS(s channel.Stats) js.Value {
	o := jsapi.NewObject()
	o.Set("received", float64(s.Received))
	o.Set("delivered", float64(s.Delivered))
	o.Set("gaps", float64(s.Gaps))
	d := jsapi.NewObject()
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

// appendMessageJSON and postResult are channel's JSON of a message and of
// a post's receipt (export_js.go writes the receipt too).
func appendMessageJSON(b []byte, m channel.Message) []byte { return channel.AppendMessageJSON(b, m) }

func postResult(b []byte, e channel.Envelope) []byte { return channel.AppendReceiptJSON(b, e) }
