//go:build js && wasm

package channel

import (
	"context"
	"errors"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/jsglue/loader"
)

// ErrClosed: the channel was closed.
var ErrClosed = errors.New("channel: closed")

// ErrInvalid: an outgoing envelope that receivers would drop.
var ErrInvalid = errors.New("channel: invalid envelope")

// Option configures Open.
type Option func(*config)

type config struct {
	limits   Limits
	buffered bool
}

// WithLimits sets the receiving (and sending) limits; zero fields keep the
// defaults.
func WithLimits(l Limits) Option { return func(c *config) { c.limits = l } }

// Buffered opens the channel in Buffer mode: subscribe before loading from
// IndexedDB, load, then Replay. Nothing that arrives during the load is lost.
func Buffered() Option { return func(c *config) { c.buffered = true } }

// Channel is a fenced BroadcastChannel. Note that a BroadcastChannel does
// not deliver a message to the instance that posted it: a leader applies
// its own messages locally.
type Channel struct {
	name   string
	bc     js.Value
	cb     *jsglue.Callback
	limits Limits
	rx     *receiver

	mu     sync.Mutex
	subs   []sub
	nextID int
	queue  []Message
	wake   chan struct{}
	closed bool
	done   chan struct{}

	encMu  sync.Mutex
	encBuf []byte       // encode's scratch
	hooks  loader.Hooks // the loader's channel hooks (fast.js), or none
	post   js.Value     // hooks' post, or undefined
	post2  js.Value     // hooks' post2, or undefined
	outs   outStrs      // JavaScript strings of recurring outgoing header fields

	hdrs hdrCache // recurring received header strings, see hdrCache

	exportID int32    // its number for the loader's rx (see exportRx), or 0
	payload  js.Value // the loader's payload(), or undefined

	// heldID is the ID of the envelope exportRx is receiving, while the
	// loader holds it and its header had no escapes (see Held); "" outside.
	// Only the export's own call reads or writes it: it runs on the event
	// loop and never blocks, so no goroutine runs in between.
	heldID string
}

// Open joins the BroadcastChannel name. Use the election's versioned name
// (for example "tabfence:<scope>:v<protocol>") so builds with different
// protocols never share a channel.
func Open(name string, opts ...Option) (*Channel, error) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	ctor := js.Global().Get("BroadcastChannel")
	if ctor.Type() != js.TypeFunction {
		return nil, jsglue.ErrUnavailable
	}
	bc, err := jsglue.Try(func() js.Value { return ctor.New(name) })
	if err != nil {
		return nil, err
	}
	c := &Channel{
		name: name, bc: bc, limits: cfg.limits.withDefaults(),
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	c.rx = newReceiver(c.limits, cfg.buffered)
	c.hooks = loader.Group(loader.GroupChannel, loaderLayout)
	rx := c.hooks.Func("rx")
	// The one callback of this channel. It decodes and runs the cursor at
	// once (pure and fast), calls the non-blocking subscribers (SubscribeNow)
	// and hands accepted messages to the delivery goroutine for the others,
	// so a slow subscriber never blocks the event loop.
	c.cb = jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
		switch {
		case rx.IsUndefined(): // called with the event
			data := js.Undefined()
			if len(args) > 0 && args[0].Type() == js.TypeObject {
				data = args[0].Get("data")
			}
			c.receive(decode(data, c.limits, &c.hdrs))
		case len(args) == 2 && args[0].Type() == js.TypeNumber: // (header's length in scratch, payload)
			c.receiveHeader(loader.ReadScratch(args[0].Int()), args[1])
		case len(args) == 2 && args[0].Type() == js.TypeString: // (header, payload), see fast.js
			c.receiveHeader(args[0].String(), args[1])
		default: // (undefined, data): not plainly an envelope
			data := js.Undefined()
			if len(args) == 2 {
				data = args[1]
			}
			c.receive(decode(data, c.limits, &c.hdrs))
		}
		return nil
	})
	handler := c.cb.Value
	if !rx.IsUndefined() {
		c.exportID = exported.add(c)
		handler = rx.Invoke(c.cb.Value, headerTextBound(c.limits), loader.Scratch(), c.exportID, loader.Kick())
	}
	c.post, c.post2, c.payload = c.hooks.Func("post"), c.hooks.Func("post2"), loader.PayloadFunc()
	bc.Set("onmessage", handler)
	// A message that fails to deserialize is also someone else's garbage.
	bc.Set("onmessageerror", handler)
	go c.deliver()
	return c, nil
}

// receive runs one decoded envelope (why != ReasonNone: decoding rejected
// it) through the receiver and delivers it if accepted.
func (c *Channel) receive(e Envelope, why Reason) {
	if m, ok := c.rx.receive(e, why); ok {
		c.dispatch(m)
	}
}

// receiveHeader receives an envelope the loader's rx handed over as its
// JSON header (see decodeHeaderJSON) and payload: the same checks as decode.
func (c *Channel) receiveHeader(hdr string, payload js.Value) {
	c.receiveHeaderHeld(hdr, payload, false)
}

// receiveHeaderHeld is receiveHeader; held: the loader holds the envelope
// while this runs (exportRx), so a plain one is marked for Held.
func (c *Channel) receiveHeaderHeld(hdr string, payload js.Value, held bool) {
	e, why := decodeHeaderJSON(hdr, c.limits)
	if why == ReasonNone {
		e.Payload, why = payload, receivedPayloadReason(payload, c.limits)
	}
	if why == ReasonNone && held && plainJSON(hdr) {
		c.heldID = e.ID
		defer func() { c.heldID = "" }()
	}
	c.receive(e, why)
}

// plainJSON reports whether the JSON text h has no escape: its strings are
// then byte for byte the UTF-8 of the strings JSON.stringify was given (a
// lone surrogate, which UTF-8 cannot carry, is always escaped).
func plainJSON(h string) bool {
	for i := 0; i < len(h); i++ {
		if h[i] == '\\' {
			return false
		}
	}
	return true
}

// Held reports whether m is the envelope the loader is handing to Go at
// this moment (a SubscribeNow function called during the wasm export
// tabfence_channel_rx2) and is plain: the hook deliverHeld may then build the
// message in JavaScript from that very envelope, equal to the one deliver
// builds from m's JSON, without crossing m's fields again.
func (c *Channel) Held(m Message) bool { return c.heldID != "" && m.ID == c.heldID }

// Deliverers returns the loader's deliver and deliverHeld hooks (fast.js),
// undefined without the loader: the JavaScript API hands its subscribers
// their messages through them (deliverHeld for a message Held).
func (c *Channel) Deliverers() (deliver, deliverHeld js.Value) {
	return c.hooks.Func("deliver"), c.hooks.Func("deliverHeld")
}

// Name returns the channel's name.
func (c *Channel) Name() string { return c.name }

// dispatch delivers accepted messages, in order: it calls the subscribers
// registered with SubscribeNow itself, and queues the messages for the
// delivery goroutine when there are others. (A goroutine handoff is cheap,
// but a non-blocking subscriber on the message path need not pay for it,
// nor for the queue.)
func (c *Channel) dispatch(ms ...Message) {
	if len(ms) == 0 {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	subs := c.subs // replaced, never mutated in place
	queued := false
	for _, s := range subs {
		if !s.now {
			c.queue = append(c.queue, ms...)
			queued = true
			break
		}
	}
	c.mu.Unlock()
	for _, m := range ms {
		for _, s := range subs {
			if s.now {
				safeCall(s.fn, m)
			}
		}
	}
	if queued {
		select {
		case c.wake <- struct{}{}:
			Woke()
		default:
		}
	}
}

func (c *Channel) deliver() {
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		}
		for {
			c.mu.Lock()
			if c.closed || len(c.queue) == 0 {
				c.mu.Unlock()
				break
			}
			m := c.queue[0]
			c.queue = c.queue[1:]
			subs := c.subs // replaced, never mutated in place
			c.mu.Unlock()
			for _, s := range subs {
				if !s.now {
					safeCall(s.fn, m)
				}
			}
		}
	}
}

func safeCall(fn func(Message), m Message) {
	defer func() {
		if r := recover(); r != nil && jsglue.PanicHandler != nil {
			jsglue.PanicHandler(r)
		}
	}()
	fn(m)
}

type sub struct {
	id  int
	fn  func(Message)
	now bool // called by dispatch itself, see SubscribeNow
}

// Subscribe registers fn for fresh messages only: stale tokens, replays and
// garbage never reach it. fn runs on the channel's delivery goroutine, in
// arrival order; it may block, at the cost of delaying later messages. A
// Message with Gap set means messages were missed: reload from storage.
// Call the returned function to unsubscribe.
func (c *Channel) Subscribe(fn func(Message)) (unsubscribe func()) {
	return c.subscribe(fn, false)
}

// SubscribeNow is Subscribe for a fn that never blocks (it only records the
// message, or hands it on): fn is called directly by the channel's message
// handler on the JavaScript event loop (or by Replay, on its caller's
// goroutine), in arrival order, without the delivery goroutine. A fn that
// blocks there stalls the page: use Subscribe for anything that waits. A
// fn that wakes a waiting goroutine (a send or close it waits on) calls
// Woke, so that goroutine runs at once when the message came through the
// loader's export (see export_js.go); starting one needs no call.
func (c *Channel) SubscribeNow(fn func(Message)) (unsubscribe func()) {
	return c.subscribe(fn, true)
}

func (c *Channel) subscribe(fn func(Message), now bool) (unsubscribe func()) {
	c.mu.Lock()
	id := c.nextID
	c.nextID++
	c.subs = append(c.subs[:len(c.subs):len(c.subs)], sub{id, fn, now})
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		out := make([]sub, 0, len(c.subs))
		for _, s := range c.subs {
			if s.id != id {
				out = append(out, s)
			}
		}
		c.subs = out
		c.mu.Unlock()
	}
}

// Buffer starts holding incoming messages (subscribe-before-load): call it,
// load state from IndexedDB, then Replay. Open with Buffered() to buffer
// from the very first message.
func (c *Channel) Buffer() { c.rx.startBuffering() }

// Replay applies the cursor rules to the buffered messages in arrival order,
// delivers the fresh ones to subscribers and goes live. Messages already
// covered by the loaded state can be skipped with Seed before Replay.
func (c *Channel) Replay() { c.dispatch(c.rx.replay()...) }

// Seed tells the receiver the position (token, sequence) the app loaded
// from storage for resource, so older messages are dropped.
func (c *Channel) Seed(resource string, token, seq uint64) { c.rx.seed(resource, token, seq) }

// Stats returns a snapshot of the counters.
func (c *Channel) Stats() Stats { return c.rx.snapshot() }

// Post sends e as a plain JavaScript object (no JSON). It refuses an
// envelope receivers would drop; a payload that cannot be cloned fails with
// jsglue.ErrDataClone.
func (c *Channel) Post(e Envelope) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if why := c.limits.Check(e); why != ReasonNone {
		return errors.Join(ErrInvalid, errors.New("channel: "+why.String()))
	}
	if why := payloadReason(e.Payload, c.limits); why != ReasonNone {
		return errors.Join(ErrInvalid, errors.New("channel: payload "+why.String()))
	}
	if w, ok := idWords(e.ID); ok && !c.post2.IsUndefined() {
		_, err := jsglue.Invoke(c.post2, c.bc, c.outs.get(e.Kind), c.outs.get(e.Resource), c.outs.get(e.Owner),
			w[0], w[1], w[2], w[3], float64(e.Token), float64(e.Seq), float64(e.SentAt), e.Payload)
		return err
	}
	if !c.post.IsUndefined() {
		c.encMu.Lock()
		c.encBuf = appendHeaderJSON(c.encBuf[:0], e, false)
		err := loader.CallText(c.post, c.bc, c.encBuf, e.Payload)
		c.encMu.Unlock()
		return err
	}
	_, err := jsglue.Call(c.bc, "postMessage", c.encode(e))
	return err
}

// PostsThroughLoader reports whether Post sends through the loader's post
// or post2 hooks, which keep the envelope they sent for the loader's
// poster.
func (c *Channel) PostsThroughLoader() bool { return !c.post.IsUndefined() }

// Send stamps payload with s's next sequence and posts it.
func (c *Channel) Send(s *Sequencer, kind string, payload js.Value) (Envelope, error) {
	e := s.Next(kind, payload)
	return e, c.Post(e)
}

// Announce is "write, then announce": it runs commit (an IndexedDB write
// that returns once its transaction committed) and only if it succeeded
// posts kind/payload under s. If commit fails nothing is posted and no
// sequence is used, so followers see no false gap. Followers that miss the
// message, or see a gap, reload from storage, and because of this order
// they find at least what they were told about.
func (c *Channel) Announce(ctx context.Context, s *Sequencer, commit func(ctx context.Context) error, kind string, payload js.Value) (Envelope, error) {
	if err := ctx.Err(); err != nil {
		return Envelope{}, err
	}
	if err := commit(ctx); err != nil {
		return Envelope{}, err
	}
	return c.Send(s, kind, payload)
}

// Close leaves the channel and releases its callback. Safe to call twice.
func (c *Channel) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.queue = nil
	c.mu.Unlock()
	close(c.done)
	exported.remove(c.exportID)
	c.bc.Set("onmessage", js.Null())
	c.bc.Set("onmessageerror", js.Null())
	_, err := jsglue.Call(c.bc, "close")
	c.cb.Release()
	return err
}

// encode builds the envelope as a plain object in one JSON.parse of its
// header (see appendHeaderJSON) and one property write for the payload,
// instead of a property write per field: every crossing into JavaScript
// decodes a property name and every string value registers a new
// reference, which the message path pays per message.
func (c *Channel) encode(e Envelope) js.Value {
	withPayload := e.Payload.Type() != js.TypeUndefined
	o := jsJSONParse.Invoke(c.header(e, withPayload))
	if withPayload {
		o.Set("payload", e.Payload)
	}
	return o
}

// header is e's header as JSON (appendHeaderJSON).
func (c *Channel) header(e Envelope, withPayload bool) string {
	c.encMu.Lock()
	c.encBuf = appendHeaderJSON(c.encBuf[:0], e, withPayload)
	s := string(c.encBuf)
	c.encMu.Unlock()
	return s
}

// outStrs remembers the JavaScript strings of a few outgoing header fields
// (a leader's resource and owner, its kinds): each js.ValueOf of a Go string
// decodes it in JavaScript and registers a reference, which Post2 would
// otherwise pay per field per post. A new string replaces the oldest entry.
type outStrs struct {
	mu   sync.Mutex
	ents [8]struct {
		s string
		v js.Value
	}
	next int
}

// get returns s as a JavaScript string.
func (o *outStrs) get(s string) js.Value {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range o.ents {
		if e := &o.ents[i]; e.s == s && e.v.Type() == js.TypeString {
			return e.v
		}
	}
	v := js.ValueOf(s)
	e := &o.ents[o.next]
	e.s, e.v = s, v
	o.next = (o.next + 1) % len(o.ents)
	return v
}
