//go:build js && wasm

package channel

import (
	"context"
	"errors"
	"math"
	"sync"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
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
	// The one callback of this channel. It decodes and runs the cursor at
	// once (pure and fast) and hands accepted messages to the delivery
	// goroutine, so a slow subscriber never blocks the event loop.
	c.cb = jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
		data := js.Undefined()
		if len(args) > 0 && args[0].Type() == js.TypeObject {
			data = args[0].Get("data")
		}
		e, why := decode(data, c.limits)
		if m, ok := c.rx.receive(e, why); ok {
			c.enqueue(m)
		}
		return nil
	})
	bc.Set("onmessage", c.cb.Value)
	// A message that fails to deserialize is also someone else's garbage.
	bc.Set("onmessageerror", c.cb.Value)
	go c.deliver()
	return c, nil
}

// Name returns the channel's name.
func (c *Channel) Name() string { return c.name }

func (c *Channel) enqueue(ms ...Message) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.queue = append(c.queue, ms...)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
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
				safeCall(s.fn, m)
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
	id int
	fn func(Message)
}

// Subscribe registers fn for fresh messages only: stale tokens, replays and
// garbage never reach it. fn runs on the channel's delivery goroutine, in
// arrival order; it may block, at the cost of delaying later messages. A
// Message with Gap set means messages were missed: reload from storage.
// Call the returned function to unsubscribe.
func (c *Channel) Subscribe(fn func(Message)) (unsubscribe func()) {
	c.mu.Lock()
	id := c.nextID
	c.nextID++
	c.subs = append(c.subs[:len(c.subs):len(c.subs)], sub{id, fn})
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
func (c *Channel) Replay() { c.enqueue(c.rx.replay()...) }

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
	_, err := jsglue.Call(c.bc, "postMessage", encode(e))
	return err
}

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
	c.bc.Set("onmessage", js.Null())
	c.bc.Set("onmessageerror", js.Null())
	_, err := jsglue.Call(c.bc, "close")
	c.cb.Release()
	return err
}

func encode(e Envelope) js.Value {
	o := js.ValueOf(map[string]any{
		"protocol": e.Protocol,
		"version":  e.Version,
		"id":       e.ID,
		"kind":     e.Kind,
		"resource": e.Resource,
		"owner":    e.Owner,
		"token":    float64(e.Token),
		"seq":      float64(e.Seq),
		"sentAt":   float64(e.SentAt),
	})
	if e.Payload.Type() != js.TypeUndefined {
		o.Set("payload", e.Payload)
	}
	return o
}

// ---- decoding untrusted values ----

var (
	jsObject      = js.Global().Get("Object")
	jsArrayBuffer = js.Global().Get("ArrayBuffer")
	jsBlob        = js.Global().Get("Blob")
)

// decode reads an envelope from any value any same-origin script may have
// posted. Every access goes through jsglue's guarded accessors; every field's type and bounds
// are checked; strings are measured before they are copied into Go.
func decode(data js.Value, l Limits) (Envelope, Reason) {
	v := data
	if v.Type() != js.TypeObject {
		return Envelope{}, Malformed
	}
	var e Envelope
	var why Reason
	// Protocol first: a value that is not ours is foreign, not malformed.
	p, err := jsglue.Get(v, "protocol")
	if err != nil || p.Type() != js.TypeString {
		return Envelope{}, ForeignProtocol
	}
	if e.Protocol, why = str(p, len(Protocol)); why != ReasonNone || e.Protocol != Protocol {
		return Envelope{}, ForeignProtocol
	}
	ver, why := num(v, "version")
	if why != ReasonNone {
		return Envelope{}, why
	}
	if ver != Version {
		return Envelope{}, WrongVersion
	}
	e.Version = Version
	if e.ID, why = strField(v, "id", l.MaxID); why != ReasonNone {
		return Envelope{}, why
	}
	if e.Kind, why = strField(v, "kind", l.MaxKind); why != ReasonNone {
		return Envelope{}, why
	}
	if e.Resource, why = strField(v, "resource", l.MaxResource); why != ReasonNone {
		return Envelope{}, why
	}
	if e.Owner, why = strField(v, "owner", l.MaxOwner); why != ReasonNone {
		return Envelope{}, why
	}
	if e.Token, why = num(v, "token"); why != ReasonNone {
		return Envelope{}, why
	}
	if e.Seq, why = num(v, "seq"); why != ReasonNone {
		return Envelope{}, why
	}
	ts, why := num(v, "sentAt")
	if why != ReasonNone {
		return Envelope{}, why
	}
	e.SentAt = int64(ts)
	pl, err := jsglue.Get(v, "payload")
	if err != nil {
		return Envelope{}, Malformed
	}
	if why := payloadReason(pl, l); why != ReasonNone {
		return Envelope{}, why
	}
	e.Payload = pl
	return e, ReasonNone
}

func strField(v js.Value, name string, max int) (string, Reason) {
	f, err := jsglue.Get(v, name)
	if err != nil || f.Type() != js.TypeString {
		return "", Malformed
	}
	return str(f, max)
}

// str copies a JavaScript string into Go after checking its length.
// Object(s) wraps the primitive without copying and exposes length.
func str(f js.Value, max int) (string, Reason) {
	n, ok := length(f)
	if !ok {
		return "", Malformed
	}
	if n > float64(max) {
		return "", Oversized
	}
	return f.String(), ReasonNone
}

func length(f js.Value) (float64, bool) {
	w, err := jsglue.Invoke(jsObject, f)
	if err != nil {
		return 0, false
	}
	n, err := jsglue.Get(w, "length")
	if err != nil || n.Type() != js.TypeNumber {
		return 0, false
	}
	return n.Float(), true
}

// num reads a non-negative integer field <= 2^53-1: NaN, Infinity,
// negatives, fractions, strings and missing fields are malformed.
func num(v js.Value, name string) (uint64, Reason) {
	f, err := jsglue.Get(v, name)
	if err != nil || f.Type() != js.TypeNumber {
		return 0, Malformed
	}
	x := f.Float()
	if math.IsNaN(x) || x < 0 || x > MaxToken || x != math.Trunc(x) {
		return 0, Malformed
	}
	return uint64(x), ReasonNone
}

// payloadReason measures what can be measured without walking the value.
func payloadReason(p js.Value, l Limits) Reason {
	max := float64(l.MaxPayload)
	switch p.Type() {
	case js.TypeString:
		if n, ok := length(p); !ok || n > max {
			return Oversized
		}
	case js.TypeObject:
		if jsglue.InstanceOf(p, jsArrayBuffer) {
			return sizeProp(p, "byteLength", max)
		}
		if isView, err := jsglue.Call(jsArrayBuffer, "isView", p); err == nil && isView.Truthy() {
			return sizeProp(p, "byteLength", max)
		}
		if jsBlob.Type() == js.TypeFunction && jsglue.InstanceOf(p, jsBlob) {
			return sizeProp(p, "size", max)
		}
	}
	return ReasonNone
}

func sizeProp(p js.Value, prop string, max float64) Reason {
	n, err := jsglue.Get(p, prop)
	if err != nil || n.Type() != js.TypeNumber {
		return Malformed
	}
	if x := n.Float(); x > max {
		return Oversized
	}
	return ReasonNone
}
