package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// ErrBrowserGone is returned by a BiDi call when the connection to the
// browser has ended (the process exited or was killed, or close ran): a
// dead browser fails calls instead of leaving them waiting.
var ErrBrowserGone = errors.New("harness: the browser's WebDriver BiDi connection is closed")

// BiDiError is a command the browser refused: WebDriver BiDi's error
// code (e.g. "unknown command", "invalid argument") and its message.
type BiDiError struct {
	Method  string
	Code    string
	Message string
}

func (e *BiDiError) Error() string {
	return "harness: bidi " + e.Method + ": " + e.Code + ": " + e.Message
}

// bidiConn is one WebDriver BiDi session's socket. Commands carry an id
// the browser echoes in its reply, so several calls may be in flight at
// once (a page's long evaluate does not hold up another page's navigate);
// events are handed to the waiters registered for their method.
type bidiConn struct {
	ws *websocket.Conn

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan bidiReply
	waiters map[uint64]*bidiWaiter
	nextW   uint64
	// listeners get every event of their methods until removed (a
	// network log); waiters get one.
	listeners map[uint64]*bidiListener
	err       error         // why the connection ended, once done is closed
	done      chan struct{} // closed when the read loop ends
}

// bidiReply is one command's outcome.
type bidiReply struct {
	result json.RawMessage
	err    error
}

// bidiWaiter receives the events of one method its match accepts.
type bidiWaiter struct {
	method string
	match  func(params json.RawMessage) bool
	ch     chan json.RawMessage // buffered 1; the first matching event
}

// bidiListener is handed every event whose method is in methods. on runs
// on the read loop with the connection's lock held: it must be quick and
// must not call the connection.
type bidiListener struct {
	methods map[string]bool
	on      func(method string, params json.RawMessage)
}

// bidiMessage is every message the browser sends: a command's success or
// error (id set) or an event (method set).
type bidiMessage struct {
	Type    string          `json:"type"`
	ID      *uint64         `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   string          `json:"error"`
	Message string          `json:"message"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// maxBiDiMessage bounds one incoming message; a whole-document screenshot
// of a long page is several megabytes of base64.
const maxBiDiMessage = 256 << 20

func newBiDiConn(ws *websocket.Conn) *bidiConn {
	ws.SetReadLimit(maxBiDiMessage)
	c := &bidiConn{
		ws:      ws,
		pending: map[uint64]chan bidiReply{},
		waiters: map[uint64]*bidiWaiter{},
		// listeners share the waiters' ids (nextW).
		listeners: map[uint64]*bidiListener{},
		done:      make(chan struct{}),
	}
	go c.readLoop()
	return c
}

// readLoop runs until the socket fails, then fails every pending call.
func (c *bidiConn) readLoop() {
	// The loop's context is not a caller's: the socket lives until close
	// or until the browser goes away.
	ctx := context.Background()
	var err error
	for {
		var data []byte
		_, data, err = c.ws.Read(ctx)
		if err != nil {
			break
		}
		var m bidiMessage
		if jerr := json.Unmarshal(data, &m); jerr != nil {
			err = fmt.Errorf("harness: bidi: undecodable message: %w", jerr)
			break
		}
		c.dispatch(&m)
	}
	c.mu.Lock()
	c.err = fmt.Errorf("%w (%v)", ErrBrowserGone, err)
	for id, ch := range c.pending {
		ch <- bidiReply{err: c.err}
		delete(c.pending, id)
	}
	c.mu.Unlock()
	close(c.done)
	_ = c.ws.CloseNow()
}

func (c *bidiConn) dispatch(m *bidiMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.ID != nil {
		ch, ok := c.pending[*m.ID]
		if !ok {
			return // its caller gave up (ctx done)
		}
		delete(c.pending, *m.ID)
		if m.Type == "error" {
			ch <- bidiReply{err: &BiDiError{Code: m.Error, Message: m.Message}}
		} else {
			ch <- bidiReply{result: m.Result}
		}
		return
	}
	if m.Type != "event" {
		return
	}
	for id, w := range c.waiters {
		if w.method == m.Method && (w.match == nil || w.match(m.Params)) {
			w.ch <- m.Params
			delete(c.waiters, id)
		}
	}
	for _, l := range c.listeners {
		if l.methods[m.Method] {
			l.on(m.Method, m.Params)
		}
	}
}

// call sends one command and waits for its reply, ctx, or the end of the
// connection, whichever comes first. out (if not nil) receives the result.
func (c *bidiConn) call(ctx context.Context, method string, params, out any) error {
	if params == nil {
		params = struct{}{}
	}
	ch := make(chan bidiReply, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	data, err := json.Marshal(struct {
		ID     uint64 `json:"id"`
		Method string `json:"method"`
		Params any    `json:"params"`
	}{id, method, params})
	if err == nil {
		err = c.send(ctx, data)
	}
	if err != nil {
		c.forget(id)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("harness: bidi %s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			var be *BiDiError
			if errors.As(r.err, &be) {
				be.Method = method
			}
			return r.err
		}
		if out != nil {
			if err := json.Unmarshal(r.result, out); err != nil {
				return fmt.Errorf("harness: bidi %s: decoding result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.forget(id)
		return ctx.Err()
	}
}

// bidiWriteTimeout bounds one message's write. A write that outlives its
// context closes the whole socket (coder/websocket's write timeout), so
// it must not be the caller's: one tab's spent deadline would end every
// tab's session. Only a browser that stops reading hits this bound.
const bidiWriteTimeout = 10 * time.Second

// send writes one message under a context of its own. The caller stops
// waiting when its ctx ends; the write itself runs on to its own bound.
// A write on a socket that has gone reports ErrBrowserGone.
func (c *bidiConn) send(ctx context.Context, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bidiWriteTimeout)
		defer cancel()
		done <- c.ws.Write(wctx, websocket.MessageText, data)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if err == nil {
		return nil
	}
	// The read loop ends right after the socket closes; its error says
	// why (the browser went away, or close ran).
	select {
	case <-c.done:
		return c.err
	case <-time.After(time.Second):
		return err
	}
}

func (c *bidiConn) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// await registers interest in the next event of method that match
// accepts; register before sending the command that causes it. wait
// blocks for it (or ctx, or the connection's end); cancel withdraws it.
func (c *bidiConn) await(method string, match func(json.RawMessage) bool) (wait func(context.Context) (json.RawMessage, error), cancel func()) {
	w := &bidiWaiter{method: method, match: match, ch: make(chan json.RawMessage, 1)}
	c.mu.Lock()
	c.nextW++
	id := c.nextW
	c.waiters[id] = w
	c.mu.Unlock()
	cancel = func() {
		c.mu.Lock()
		delete(c.waiters, id)
		c.mu.Unlock()
	}
	wait = func(ctx context.Context) (json.RawMessage, error) {
		select {
		case p := <-w.ch:
			return p, nil
		case <-ctx.Done():
			cancel()
			return nil, ctx.Err()
		case <-c.done:
			return nil, c.err
		}
	}
	return wait, cancel
}

// listen hands on every later event of methods until the returned remove
// is called; after remove returns, on is not called again.
func (c *bidiConn) listen(methods []string, on func(method string, params json.RawMessage)) (remove func()) {
	l := &bidiListener{methods: map[string]bool{}, on: on}
	for _, m := range methods {
		l.methods[m] = true
	}
	c.mu.Lock()
	c.nextW++
	id := c.nextW
	c.listeners[id] = l
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.listeners, id)
		c.mu.Unlock()
	}
}

// close ends the socket; pending and later calls fail with ErrBrowserGone.
func (c *bidiConn) close() {
	_ = c.ws.CloseNow()
	<-c.done
}
