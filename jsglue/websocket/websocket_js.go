//go:build js && wasm

// Package websocket is the page's WebSocket for Go: binary messages in a
// bounded receive queue, a close code, and a dial error that says the HTTP
// status the browser hides. It is a thin binding (no framing of its own, so
// it costs a few kilobytes, not a WebSocket implementation's worth).
package websocket

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall/js"

	"github.com/tabfence/tabfence/jsglue"
)

// DefaultQueue is how many received messages wait for Recv before the
// socket is closed as overrun.
const DefaultQueue = 256

// ErrClosed: Send on a socket that is closed or closing.
var ErrClosed = errors.New("websocket: closed")

// ErrOverrun: the receive queue was full; the socket was closed.
var ErrOverrun = errors.New("websocket: receive queue full")

// ErrInvalidURL: the URL (or a subprotocol) was refused before any dial.
// Its text never repeats the URL, which may hold a ticket.
var ErrInvalidURL = errors.New("websocket: invalid URL or subprotocol")

// DialError is a dial that failed before the socket opened. Status is the
// HTTP status of a plain request to the same URL (the browser hides the
// upgrade's), 0 when that probe got no answer. Error names only Where (the
// origin and path): the full URL, kept for Go code, may carry a secret
// (?ticket=...) that must not reach a log or a channel.
type DialError struct {
	URL    string // as given to Dial; never in Error()
	Where  string // origin + path
	Status int
}

func (e *DialError) Error() string {
	return "websocket: dial " + e.Where + " failed (HTTP " + strconv.Itoa(e.Status) + ")"
}

// CloseError is how Recv reports the end of a socket: the close event's
// code and reason (Code -1 when the socket ended without one here).
type CloseError struct {
	Code   int
	Reason string
	Err    error // ErrOverrun when the queue overflowed, else nil
}

func (e *CloseError) Error() string {
	return "websocket: closed (" + strconv.Itoa(e.Code) + " " + e.Reason + ")"
}

func (e *CloseError) Unwrap() error { return e.Err }

var overruns atomic.Uint64

// Overruns counts the sockets of this program closed for a full receive
// queue.
func Overruns() uint64 { return overruns.Load() }

// Conn is an open WebSocket.
type Conn struct {
	ws    js.Value
	max   int
	mu    sync.Mutex
	queue [][]byte
	wake  chan struct{}
	done  chan struct{}
	cbs   []*jsglue.Callback
	end   *CloseError // set once the socket ended
}

// Dial opens url (ws:, wss:, or a path resolved against the page: ws for
// http pages, wss for https) with the given subprotocols, and waits for it
// to open or fail.
func Dial(ctx context.Context, url string, protocols []string) (*Conn, error) {
	wsURL, httpURL, where, err := resolve(url)
	if err != nil {
		return nil, err
	}
	protos := make([]any, len(protocols))
	for i, p := range protocols {
		protos[i] = p
	}
	ws, err := jsglue.Try(func() js.Value { return js.Global().Get("WebSocket").New(wsURL, protos) })
	if err != nil {
		return nil, ErrInvalidURL // the browser's SyntaxError quotes the URL
	}
	ws.Set("binaryType", "arraybuffer")
	c := &Conn{ws: ws, max: DefaultQueue, wake: make(chan struct{}, 1), done: make(chan struct{})}
	opened := make(chan struct{})
	var once sync.Once
	c.on("open", func(js.Value) { once.Do(func() { close(opened) }) })
	c.on("message", c.received)
	c.on("close", func(ev js.Value) {
		c.ended(&CloseError{Code: ev.Get("code").Int(), Reason: ev.Get("reason").String()})
	})
	select {
	case <-opened:
		return c, nil
	case <-c.done:
		return nil, &DialError{URL: url, Where: where, Status: probe(ctx, httpURL)}
	case <-ctx.Done():
		c.Close("dial cancelled")
		return nil, ctx.Err()
	}
}

// resolve makes url absolute against the page, for the socket and for the
// status probe; where is its origin and path, for errors.
func resolve(url string) (wsURL, httpURL, where string, err error) {
	base := js.Global().Get("location")
	u, err := jsglue.Try(func() js.Value {
		if base.IsUndefined() {
			return js.Global().Get("URL").New(url)
		}
		return js.Global().Get("URL").New(url, base.Get("href"))
	})
	if err != nil {
		return "", "", "", ErrInvalidURL // the TypeError quotes the URL
	}
	switch u.Get("protocol").String() {
	case "http:", "ws:":
		u.Set("protocol", "ws:")
		wsURL = u.Get("href").String()
		u.Set("protocol", "http:")
	case "https:", "wss:":
		u.Set("protocol", "wss:")
		wsURL = u.Get("href").String()
		u.Set("protocol", "https:")
	default:
		return "", "", "", errors.Join(ErrInvalidURL, errors.New("websocket: unsupported URL scheme "+u.Get("protocol").String()))
	}
	return wsURL, u.Get("href").String(), u.Get("origin").String() + u.Get("pathname").String(), nil
}

// probe asks url over HTTP, with the page's credentials, for the status
// the failed upgrade would have had (0: no answer).
func probe(ctx context.Context, httpURL string) int {
	opts := js.Global().Get("Object").New()
	opts.Set("credentials", "include")
	opts.Set("cache", "no-store")
	p, err := jsglue.Call(js.Global(), "fetch", httpURL, opts)
	if err != nil {
		return 0
	}
	resp, err := jsglue.Await(ctx, p)
	if err != nil || resp.Type() != js.TypeObject {
		return 0
	}
	if b := resp.Get("body"); b.Type() == js.TypeObject {
		_, _ = jsglue.Call(b, "cancel") // the status is all we need
	}
	return resp.Get("status").Int()
}

func (c *Conn) on(event string, fn func(ev js.Value)) {
	cb := jsglue.NewCallback(func(_ js.Value, args []js.Value) any {
		ev := js.Undefined()
		if len(args) > 0 {
			ev = args[0]
		}
		fn(ev)
		return nil
	})
	c.cbs = append(c.cbs, cb)
	c.ws.Set("on"+event, cb.Value)
}

// received queues one message; a full queue closes the socket (counted)
// rather than holding without bound what the reader does not take.
func (c *Conn) received(ev js.Value) {
	data := ev.Get("data")
	var b []byte
	if data.Type() == js.TypeString {
		b = []byte(data.String())
	} else {
		a := js.Global().Get("Uint8Array").New(data)
		b = make([]byte, a.Length())
		js.CopyBytesToGo(b, a)
	}
	c.mu.Lock()
	if c.end != nil {
		c.mu.Unlock()
		return
	}
	if len(c.queue) >= c.max {
		c.mu.Unlock()
		overruns.Add(1)
		c.shut(&CloseError{Code: -1, Reason: "receive queue full", Err: ErrOverrun}, "receive queue full")
		return
	}
	c.queue = append(c.queue, b)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// ended records the end of the socket once and releases its callbacks.
func (c *Conn) ended(e *CloseError) bool {
	c.mu.Lock()
	if c.end != nil {
		c.mu.Unlock()
		return false
	}
	c.end = e
	cbs := c.cbs
	c.cbs = nil
	c.mu.Unlock()
	for _, ev := range []string{"onopen", "onmessage", "onclose"} {
		c.ws.Set(ev, js.Null())
	}
	for _, cb := range cbs {
		cb.Release()
	}
	close(c.done)
	return true
}

func (c *Conn) shut(e *CloseError, reason string) {
	if c.ended(e) {
		if len(reason) > 120 { // the browser refuses a reason over 123 bytes
			reason = reason[:120]
		}
		_, _ = jsglue.Call(c.ws, "close", 1000, reason)
	}
}

// Send writes b as one binary message.
func (c *Conn) Send(ctx context.Context, b []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	end := c.end
	c.mu.Unlock()
	if end != nil || c.ws.Get("readyState").Int() != 1 {
		return ErrClosed
	}
	_, err := jsglue.Call(c.ws, "send", jsglue.Bytes(b))
	return err
}

// Recv returns the next message; once the queue is empty and the socket
// ended it returns a *CloseError.
func (c *Conn) Recv(ctx context.Context) ([]byte, error) {
	for {
		c.mu.Lock()
		if len(c.queue) > 0 {
			b := c.queue[0]
			c.queue[0] = nil
			c.queue = c.queue[1:]
			c.mu.Unlock()
			return b, nil
		}
		end := c.end
		c.mu.Unlock()
		if end != nil {
			return nil, end
		}
		select {
		case <-c.wake:
		case <-c.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Close closes the socket (code 1000 with reason). Safe more than once.
func (c *Conn) Close(reason string) {
	c.shut(&CloseError{Code: 1000, Reason: reason}, reason)
}

// CloseCode is the close event's code carried by err (from Recv), or -1.
func CloseCode(err error) int {
	// errors.AsType, not errors.As: As links reflection into the download.
	if ce, ok := errors.AsType[*CloseError](err); ok {
		return ce.Code
	}
	return -1
}

// CloseCode is CloseCode(err), as a method so Conn satisfies an interface
// that asks its socket.
func (c *Conn) CloseCode(err error) int { return CloseCode(err) }
