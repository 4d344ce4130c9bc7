//go:build js && wasm

package browser

import (
	"context"
	"errors"
	"strconv"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/jsglue/websocket"
	"github.com/tabfence/tabfence/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

func (c *Conn) now() time.Time { return time.Now() }

// onMessage handles what the other tabs post. Everything on the channel is
// untrusted: a payload that does not validate is counted and dropped. The
// leader's announcements (delta, reload, settled, status) count only on
// the fenced resource the leaders announce under.
func (c *Conn) onMessage(m channel.Message) {
	fromLeader := m.Resource == c.names.Resource
	c.mu.Lock()
	leading := c.leading
	c.mu.Unlock()
	if m.Gap && fromLeader && !leading {
		c.reload()
	}
	ok := true
	switch {
	case m.Kind == "rt.delta" && fromLeader:
		ok = leading || c.onDelta(m.Payload) // a leader hears the server, not the channel
	case m.Kind == "rt.reload" && fromLeader:
		if !leading {
			c.reload()
		}
	case m.Kind == "rt.settled" && fromLeader:
		ok = c.onSettled(m.Payload)
	case m.Kind == "rt.status" && fromLeader:
		ok = c.onStatus(m)
	case m.Kind == "rt.status?":
		c.toLead(func(lr *leaderRun) { lr.asked() })
	case m.Kind == "rt.mutation":
		ok = c.onMutation(m.Payload)
	case m.Kind == "rt.offline":
		v := m.Payload
		ok = typeOf(v) == js.TypeObject && typeOf(v.Get("offline")) == js.TypeBoolean
		if ok {
			c.applyOffline(v.Get("offline").Bool())
		}
	default:
		ok = false
	}
	if !ok {
		c.badMessages.Add(1)
	}
}

func (c *Conn) toLead(fn func(*leaderRun)) {
	c.mu.Lock()
	lr := c.lead
	c.mu.Unlock()
	if lr != nil {
		go fn(lr)
	}
}

// typeOf is v's type, or an impossible type for a BigInt (whose Type
// panics): values from the channel or a stored record may be anything.
func typeOf(v js.Value) js.Type {
	if t, ok := jsglue.TypeOf(v); ok {
		return t
	}
	return js.Type(-1)
}

func number(v js.Value, k string) (uint64, bool) {
	f := v.Get(k)
	if typeOf(f) != js.TypeNumber {
		return 0, false
	}
	x := f.Float()
	if x < 0 || x > channel.MaxToken || x != float64(uint64(x)) {
		return 0, false
	}
	return uint64(x), true
}

// onDelta applies a follower's rule: apply in order, ignore a duplicate,
// reload on a gap (IndexedDB holds at least what was announced).
func (c *Conn) onDelta(p js.Value) bool {
	if typeOf(p) != js.TypeObject {
		return false
	}
	changes, ok := jsString(p.Get("changes"), rt.MaxMessage)
	v, ok1 := number(p, "version")
	prev, ok2 := number(p, "prev")
	if !ok || !ok1 || !ok2 || v <= prev {
		return false
	}
	// The same rule the leader applied to the server's delta: a follower's
	// app never sees changes the replica would not hold.
	if _, err := parseChanges([]byte(changes), c.cfg.Stores); err != nil {
		c.badChanges.Add(1)
		return false
	}
	d := rt.Delta{Version: v, Prev: prev, Changes: []byte(changes)}
	c.mu.Lock()
	verdict := c.fol.Offer(d)
	c.mu.Unlock()
	switch verdict {
	case realtime.Apply:
		c.deltas.call(d)
		c.notify.kick()
	case realtime.Gap:
		c.reload()
	}
	return true
}

// reload rereads the replica's version and the pending store from
// IndexedDB and tells the app.
func (c *Conn) reload() {
	c.mu.Lock()
	before := c.pend.List()
	c.mu.Unlock()
	var stored []PendingMutation
	read := false
	v, apply := reloadFollower(&c.mu, &c.fol, func() (uint64, error) {
		l, err := c.load(c.ctx)
		if err == nil {
			stored, read = l.pending, true
		}
		return l.version, err
	})
	if read {
		c.syncPending(before, stored)
	}
	c.reloads.call(v)
	for _, d := range apply {
		c.deltas.call(d)
	}
	c.notify.kick()
}

// rereadPending reloads the pending store alone (a leader's status says
// it holds another count than this tab lists).
func (c *Conn) rereadPending() {
	c.mu.Lock()
	before := c.pend.List()
	c.mu.Unlock()
	if l, err := c.load(c.ctx); err == nil {
		c.syncPending(before, l.pending)
	}
}

// syncPending makes this tab's list agree with the pending store: what is
// stored but not listed was announced while this tab could not hear; what
// was listed before the read (so stored before it began) and is gone was
// settled by a leader. Its rt.settled may be on its way (a leader deletes,
// then announces): only what is still listed, and still not stored, after
// missedGrace counts as missed.
func (c *Conn) syncPending(before []rt.Mutation, stored []PendingMutation) {
	in := make(map[string]bool, len(stored))
	for _, pm := range stored {
		in[pm.ID] = true
		c.addPending(pm.Mutation.wire(), pm.MadeAt)
	}
	var gone []string
	for _, m := range before {
		if !in[m.ID] {
			gone = append(gone, m.ID)
		}
	}
	if len(gone) > 0 {
		time.AfterFunc(missedGrace, func() { c.settleMissed(gone) })
	}
}

// missedGrace is how long an rt.settled may trail its leader's delete.
const missedGrace = time.Second

// settleMissed ends the ids of gone still listed and still not stored.
func (c *Conn) settleMissed(gone []string) {
	l, err := c.load(c.ctx)
	if err != nil {
		return
	}
	in := make(map[string]bool, len(l.pending))
	for _, pm := range l.pending {
		in[pm.ID] = true
	}
	for _, id := range gone {
		if !in[id] {
			c.settle(id, realtime.Outcome{}) // false (a no-op) when its answer came meanwhile
		}
	}
}

func encodeOutcome(id string, o realtime.Outcome) js.Value {
	p := js.Global().Get("Object").New()
	p.Set("id", id)
	if a := o.Ack; a != nil {
		ack := js.Global().Get("Object").New()
		ack.Set("status", float64(a.Status))
		ack.Set("replayed", a.Replayed)
		ack.Set("result", string(a.Result))
		p.Set("ack", ack)
	} else if r := o.Reject; r != nil {
		rj := js.Global().Get("Object").New()
		rj.Set("type", r.Problem.Type)
		rj.Set("title", r.Problem.Title)
		rj.Set("detail", r.Problem.Detail)
		rj.Set("status", float64(r.Problem.Status))
		p.Set("reject", rj)
	}
	return p
}

// decodeOutcome reads an rt.settled payload, validated with the wire's
// rules (the same Decode the socket's messages pass).
func decodeOutcome(p js.Value) (string, realtime.Outcome, bool) {
	if typeOf(p) != js.TypeObject {
		return "", realtime.Outcome{}, false
	}
	id, ok := jsString(p.Get("id"), maxField)
	if !ok {
		return "", realtime.Outcome{}, false
	}
	str := func(v js.Value, k string) string {
		s, _ := jsString(v.Get(k), rt.MaxMessage/4)
		return s
	}
	var m rt.Message
	if a := p.Get("ack"); typeOf(a) == js.TypeObject {
		st, _ := number(a, "status")
		m = rt.Ack{ID: id, Status: st, Replayed: a.Get("replayed").Truthy(), Result: []byte(str(a, "result"))}
	} else if r := p.Get("reject"); typeOf(r) == js.TypeObject {
		st, _ := number(r, "status")
		m = rt.Reject{ID: id, Problem: rt.Problem{Type: str(r, "type"), Title: str(r, "title"), Detail: str(r, "detail"), Status: st}}
	} else {
		return "", realtime.Outcome{}, false
	}
	d, err := rt.Decode(rt.Encode(m), 0)
	if err != nil {
		return "", realtime.Outcome{}, false
	}
	switch v := d.(type) {
	case rt.Ack:
		return id, realtime.Outcome{Ack: &v}, true
	case rt.Reject:
		return id, realtime.Outcome{Reject: &v}, true
	}
	return "", realtime.Outcome{}, false
}

func (c *Conn) onSettled(p js.Value) bool {
	id, o, ok := decodeOutcome(p)
	if ok {
		c.settle(id, o)
	}
	return ok
}

func (c *Conn) onStatus(m channel.Message) bool {
	p := m.Payload
	if typeOf(p) != js.TypeObject {
		return false
	}
	lastErr, ok1 := jsString(p.Get("lastError"), 1024)
	state, ok2 := jsString(p.Get("state"), 64)
	st, ok3 := parseState(state)
	if !ok1 || !ok2 || !ok3 {
		return false
	}
	n, hasCount := number(p, "pending")
	c.mu.Lock()
	newLeader := m.Token > c.remote.token
	c.remote = leaderView{state: st, token: m.Token, id: m.Owner, lastErr: lastErr}
	disagree := hasCount && n != uint64(c.pend.Len()) && !c.leading
	c.mu.Unlock()
	if newLeader {
		c.repostOwn() // a settled announcement may have been lost
	}
	if disagree {
		go c.rereadPending()
	}
	c.notify.kick()
	return true
}

// onMutation: another tab made a mutation (stored in the pending store
// before it posted): every tab lists it, the leader sends it.
func (c *Conn) onMutation(p js.Value) bool {
	pm, ok := decodePending(p)
	if !ok {
		return false
	}
	m := pm.Mutation.wire()
	c.mu.Lock()
	full := c.pend.Len() >= MaxPending && !c.pend.Has(m.ID)
	c.mu.Unlock()
	if full { // a flood of new ids: dropped (counted), never sent
		c.droppedMutations.Add(1)
		return true
	}
	c.addPending(m, pm.MadeAt)
	c.mu.Lock()
	lr := c.lead
	if c.leading && lr == nil {
		c.early = append(c.early, m)
	}
	c.mu.Unlock()
	if lr != nil {
		go lr.mutate(m)
	}
	return true
}

// dialSocket opens the page's WebSocket at the URL url returns now; an
// upgrade refused with 401 is realtime.ErrUnauthorized.
func dialSocket(ctx context.Context, url func(context.Context) (string, error)) (realtime.Socket, error) {
	u, err := url(ctx)
	if err != nil {
		return nil, err
	}
	s, err := websocket.Dial(ctx, u, nil)
	if de, ok := errors.AsType[*websocket.DialError](err); ok && de.Status == 401 {
		return nil, join(realtime.ErrUnauthorized, err)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// errorWords is what the status says of a connection error: its category
// in words, never the error's text (a URL in it may carry a ticket, and
// the leader's status is posted on the channel).
func errorWords(err error) string {
	var de *websocket.DialError
	switch {
	case errors.Is(err, realtime.ErrUnauthorized):
		return "not signed in (the server answered HTTP 401)"
	case errors.As(err, &de) && de.Status == 0:
		return "cannot reach the server"
	case errors.As(err, &de):
		return "the server refused the connection (HTTP " + strconv.Itoa(de.Status) + ")"
	case errors.Is(err, websocket.ErrInvalidURL):
		return "the connection's URL is invalid"
	case errors.Is(err, ErrFence):
		return "the server gave no fencing token"
	case errors.Is(err, ErrChanges):
		return "the server sent changes that do not fit the replica"
	case errors.Is(err, context.DeadlineExceeded):
		return "the server did not answer in time"
	}
	return "connection error"
}

// fetchSnapshot GETs the replica's snapshot: {"version":N,"changes":[...]}.
func fetchSnapshot(ctx context.Context, url string, stores []string) ([]change, error) {
	opts := js.Global().Get("Object").New()
	opts.Set("credentials", "include")
	opts.Set("cache", "no-store")
	p, err := jsglue.Call(js.Global(), "fetch", url, opts)
	if err != nil {
		return nil, err
	}
	resp, err := jsglue.Await(ctx, p)
	if err != nil {
		return nil, err
	}
	if st := resp.Get("status").Int(); st != 200 {
		return nil, errors.New("realtime/browser: snapshot answered HTTP " + strconv.Itoa(st))
	}
	jp, err := jsglue.Call(resp, "json")
	if err != nil {
		return nil, err
	}
	body, err := jsglue.Await(ctx, jp)
	if err != nil {
		return nil, join(ErrChanges, err)
	}
	if body.Type() != js.TypeObject {
		return nil, ErrChanges
	}
	return checkChanges(body.Get("changes"), stores)
}

var jsObject = js.Global().Get("Object")

// maxField bounds the strings of a channel message or pending record
// (ids, ops, entities) as checkMutation's caller reads them.
const maxField = 1024

// jsString is v's string when v is a string of at most max bytes. The
// length (UTF-16 units, at most the UTF-8 bytes) is checked before the
// string is copied into Go's memory.
func jsString(v js.Value, max int) (string, bool) {
	// Length is for objects: the string is wrapped (Object(s), no copy).
	if typeOf(v) != js.TypeString || jsObject.Invoke(v).Get("length").Int() > max {
		return "", false
	}
	s := v.String()
	return s, len(s) <= max
}
