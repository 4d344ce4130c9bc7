package realtime

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/wire"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// conn is one connection. Its reader (the ServeHTTP goroutine) decodes and
// applies mutations one at a time, in the order they were sent; its writer
// is the only goroutine writing messages: deltas from the subscription,
// then the replies the reader queues on out (bounded: a reader whose replies
// cannot be written waits, so the client's further mutations stay in its
// own socket).
type conn struct {
	s     *Server
	c     *websocket.Conn
	scope string
	http  *http.Request
	out   chan []byte

	once        sync.Once
	done        chan struct{} // closed once the connection is closing
	countedSlow atomic.Bool
}

func (cn *conn) serve() {
	defer func() { _ = cn.c.CloseNow() }()
	hello, ok := cn.readHello()
	if !ok {
		return
	}
	if hello.Protocol != rt.Protocol {
		cn.fail(rt.CloseProtocol, rt.Error{Problem: rt.Problem{Type: wire.ProblemBase + "protocol-unsupported",
			Title: "Protocol version not spoken here", Status: http.StatusUpgradeRequired}})
		return
	}
	if hello.User != "" && hello.User != wire.FormatClientUser(cn.scope) {
		cn.fail(rt.CloseSession, rt.Error{Problem: rt.Problem{Type: wire.ProblemSessionMismatch,
			Title: "Replica of another user than the authenticated one", Status: http.StatusForbidden}})
		return
	}
	sub, err := cn.s.feed.Subscribe(cn.s.ctx, cn.scope, hello.Version, cn.s.opts.SendBuffer)
	if err != nil {
		cn.s.log.Error("subscribe", "err", err)
		cn.closeWith(websocket.StatusInternalError, "feed unavailable")
		return
	}
	defer sub.Cancel()
	if !cn.write(rt.Encode(rt.Ready{Version: sub.Version, Reset: sub.Reset})) {
		return
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		cn.writeLoop(sub)
	}()
	// The feed drops a subscriber whose buffer is full; watch for it apart
	// from the writer, which may be the one stuck on a client that does
	// not read.
	go func() {
		select {
		case <-sub.Lost:
			cn.closeSlow("too far behind")
		case <-cn.done:
		}
	}()
	cn.readLoop()
	<-wrote
}

// closeSlow disconnects a client that does not keep up, counted once.
func (cn *conn) closeSlow(reason string) {
	if cn.countedSlow.CompareAndSwap(false, true) {
		cn.s.slow.Add(1)
	}
	cn.closeWith(rt.CloseSlow, reason)
}

// readHello waits HelloTimeout for the first message, which must be Hello.
func (cn *conn) readHello() (rt.Hello, bool) {
	ctx, cancel := context.WithTimeout(cn.s.ctx, cn.s.opts.HelloTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { cn.closeWith(rt.CloseIdle, "no hello") })
	defer stop()
	m, ok := cn.read()
	if !ok {
		return rt.Hello{}, false
	}
	h, isHello := m.(rt.Hello)
	if !isHello {
		cn.s.malformed.Add(1)
		cn.closeWith(rt.CloseMalformed, "hello expected")
		return rt.Hello{}, false
	}
	return h, true
}

// read reads and decodes one message; on any failure the connection is
// closing (with CloseMalformed for bytes that do not decode) and ok is false.
func (cn *conn) read() (rt.Message, bool) {
	typ, b, err := cn.c.Read(context.Background())
	if err != nil {
		if errors.Is(err, websocket.ErrMessageTooBig) {
			cn.s.malformed.Add(1) // the library has closed with 1009
		}
		cn.closeWith(0, "")
		return nil, false
	}
	m, err := rt.Decode(b, cn.s.opts.MaxMessage)
	if typ != websocket.MessageBinary || err != nil {
		cn.s.malformed.Add(1)
		cn.closeWith(rt.CloseMalformed, "malformed message")
		return nil, false
	}
	return m, true
}

func (cn *conn) readLoop() {
	idle := time.AfterFunc(cn.s.opts.IdleTimeout, func() {
		cn.s.idle.Add(1)
		cn.closeWith(rt.CloseIdle, "idle")
	})
	defer idle.Stop()
	for {
		m, ok := cn.read()
		if !ok {
			return
		}
		idle.Reset(cn.s.opts.IdleTimeout)
		var reply rt.Message
		switch v := m.(type) {
		case rt.Ping:
			reply = rt.Pong(v)
		case rt.Mutation:
			reply = cn.apply(v)
		default:
			cn.s.malformed.Add(1)
			cn.closeWith(rt.CloseMalformed, "unexpected "+m.Type().String())
			return
		}
		select {
		case cn.out <- rt.Encode(reply):
		case <-cn.done:
			return
		}
	}
}

// apply runs m through the receiver and publishes its changes: in the
// transaction with a TxFeed, else after the commit, holding the scope's
// lock across both so that versions follow commit order. A replay runs no
// handler, so it publishes nothing again.
func (cn *conn) apply(m rt.Mutation) rt.Message {
	req := &Request{Scope: cn.scope, ID: m.ID, Op: m.Op, Entity: m.Entity, Payload: m.Payload,
		Resource: m.Resource, Token: m.Token, HTTP: cn.http}
	var changes []byte
	txFeed, inTx := cn.s.feed.(TxFeed)
	h := func(ctx context.Context, tx receiver.Tx, _ *receiver.Request) (receiver.Response, error) {
		res, err := cn.s.h(ctx, tx, req)
		if err == nil && res.Response.Status < 300 && checkResult(m.ID, res) != nil {
			return tooLarge(), nil
		}
		if err == nil && inTx && res.Changes != nil && res.Response.Status < 300 {
			err = txFeed.PublishTx(ctx, tx, cn.scope, res.Changes)
			changes = res.Changes
			return res.Response, err
		}
		changes = res.Changes
		return res.Response, err
	}
	if !inTx {
		mu := cn.s.scopeLock(cn.scope)
		mu.Lock()
		defer mu.Unlock()
	}
	resp := cn.s.rc.Apply(cn.s.ctx, receiver.Mutation{Scope: cn.scope, Key: m.ID, Target: m.Op + " " + m.Entity,
		Body: m.Payload, Resource: m.Resource, Token: m.Token, HTTP: cn.http}, h)
	reply := toReply(m.ID, resp)
	if ack, ok := reply.(rt.Ack); !ok || ack.Replayed || changes == nil {
		return reply
	}
	if inTx {
		txFeed.Committed(cn.s.ctx, cn.scope)
	} else if _, err := cn.s.feed.Publish(cn.s.ctx, cn.scope, changes); err != nil {
		cn.s.log.Error("publish", "err", err)
	}
	return reply
}

func (cn *conn) writeLoop(sub *Subscription) {
	for _, d := range sub.Backlog {
		if !cn.write(rt.Encode(d)) {
			return
		}
	}
	for {
		var b []byte
		select {
		case d := <-sub.C:
			b = rt.Encode(d)
		case b = <-cn.out:
			// A reply's delta was handed to the subscription before the
			// reply was queued: write it first, so a client never sees
			// the ack of a change it has not received.
			if !cn.flushDeltas(sub) {
				return
			}
		case <-cn.s.ctx.Done():
			cn.closeWith(websocket.StatusGoingAway, "server shutting down")
			return
		case <-cn.done:
			return
		}
		if !cn.write(b) {
			return
		}
	}
}

// flushDeltas writes the deltas waiting on the subscription.
func (cn *conn) flushDeltas(sub *Subscription) bool {
	for {
		select {
		case d := <-sub.C:
			if !cn.write(rt.Encode(d)) {
				return false
			}
		default:
			return true
		}
	}
}

// write sends one message within WriteTimeout; a client that does not read
// is disconnected as slow. The write's context is bounded by WriteTimeout
// alone, never derived from the server's: with that one, Shutdown closed
// sockets before their close frame went out (the library ties a write's
// context to the socket).
func (cn *conn) write(b []byte) bool {
	ctx, cancel := context.WithTimeout(context.Background(), cn.s.opts.WriteTimeout)
	defer cancel()
	if err := cn.c.Write(ctx, websocket.MessageBinary, b); err != nil {
		if ctx.Err() != nil && cn.s.ctx.Err() == nil {
			cn.closeSlow("write timeout") // the library has closed the socket already
		}
		cn.closeWith(0, "")
		return false
	}
	return true
}

// fail sends a last Error message, then closes with code.
func (cn *conn) fail(code websocket.StatusCode, m rt.Error) {
	if cn.write(rt.Encode(m)) {
		cn.closeWith(code, m.Problem.Title)
	}
}

// closeWith closes the connection once: with a close handshake carrying
// code, or at once when code is 0 (the peer is gone or broken).
func (cn *conn) closeWith(code websocket.StatusCode, reason string) {
	cn.once.Do(func() {
		close(cn.done)
		if code == 0 {
			_ = cn.c.CloseNow()
			return
		}
		_ = cn.c.Close(code, reason)
	})
}
