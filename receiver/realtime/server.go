// Package realtime is the server end of a realtime connection: one
// WebSocket per browser (its leader tab holds it), mounted like the
// receiver's handlers. A connection says hello with the replica version it
// holds and gets ready and the deltas it missed, then every delta of its
// scope in order; its mutations go through the receiver (idempotency key and
// fencing token in the business write's transaction), so a mutation resent
// by the next leader after a failover is applied once and answered with the
// stored ack.
//
// The WebSocket upgrade is authenticated like a receiver request (the same
// Scope function); no message carries a credential.
package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/wire"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// Request is a mutation as the business handler sees it.
type Request struct {
	Scope    string // the authenticated user, from the upgrade
	ID       string // the mutation id, its idempotency key
	Op       string
	Entity   string
	Payload  []byte
	Resource string // fenced resource, "" when not fenced
	Token    uint64
	HTTP     *http.Request // the upgrade request
}

// Result is a handler's answer: Response is stored with the key and
// replayed to resends (as receiver.Handler's); Changes, when not nil and
// the answer is 2xx, are published to the scope's feed after the commit.
type Result struct {
	Response receiver.Response
	Changes  []byte
}

// Handler runs a mutation inside the receiver's transaction: write through
// tx only. Errors and 5xx answers roll back and are rejected with Retry.
type Handler func(ctx context.Context, tx receiver.Tx, r *Request) (Result, error)

// Options configure a Server; zero fields take their defaults.
type Options struct {
	// Accept is passed to websocket.Accept (origins, subprotocols). By
	// default only same-host origins are accepted.
	Accept *websocket.AcceptOptions
	// MaxMessage bounds one incoming message (default rt.MaxMessage); a
	// larger one closes the connection with 1009.
	MaxMessage int
	// SendBuffer is how many deltas may wait for one connection (default
	// 256). A client further behind is disconnected with CloseSlow.
	SendBuffer int
	// HelloTimeout bounds the wait for the first message (default 10s).
	HelloTimeout time.Duration
	// IdleTimeout closes a connection that sent nothing, not even a ping,
	// for this long (default 75s: a client pings every 30s).
	IdleTimeout time.Duration
	// WriteTimeout bounds one message's write (default 10s); a client that
	// does not read is disconnected.
	WriteTimeout time.Duration
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxMessage <= 0 {
		o.MaxMessage = rt.MaxMessage
	}
	if o.SendBuffer <= 0 {
		o.SendBuffer = 256
	}
	if o.HelloTimeout <= 0 {
		o.HelloTimeout = 10 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 75 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Stats counts a server's connections.
type Stats struct {
	Open      int64 // connections open now
	Accepted  int64 // connections upgraded, in all
	Slow      int64 // disconnected for not keeping up
	Malformed int64 // disconnected for a message that did not decode or came out of order
	Idle      int64 // disconnected for sending nothing within IdleTimeout
}

// Server is the realtime endpoint; it is an http.Handler for the upgrade.
type Server struct {
	rc    *receiver.Receiver
	feed  Feed
	h     Handler
	opts  Options
	log   *slog.Logger
	ctx   context.Context
	stop  context.CancelFunc
	conns sync.WaitGroup
	// scopes serialize a scope's mutations from their transaction to their
	// publish when the feed numbers deltas after the commit (not a TxFeed).
	scopes [64]sync.Mutex

	mu   sync.Mutex
	live map[string]map[*conn]struct{} // open connections by scope

	open, accepted, slow, malformed, idle atomic.Int64
}

// New returns a server applying mutations with h through rc and streaming
// feed's deltas.
func New(rc *receiver.Receiver, feed Feed, h Handler, opts Options) *Server {
	opts = opts.withDefaults()
	ctx, stop := context.WithCancel(context.Background())
	return &Server{rc: rc, feed: feed, h: h, opts: opts, log: opts.Logger.With("component", "realtime"), ctx: ctx, stop: stop}
}

func (s *Server) scopeLock(scope string) *sync.Mutex {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(scope); i++ {
		h = (h ^ uint32(scope[i])) * 16777619
	}
	return &s.scopes[h%uint32(len(s.scopes))]
}

// Stats returns the connection counters.
func (s *Server) Stats() Stats {
	return Stats{Open: s.open.Load(), Accepted: s.accepted.Load(), Slow: s.slow.Load(),
		Malformed: s.malformed.Load(), Idle: s.idle.Load()}
}

// Publish appends changes made outside a realtime mutation (an HTTP
// handler, a job) to scope's feed, after their transaction committed.
// Changes that would not fit in one message are refused with ErrTooLarge.
func (s *Server) Publish(ctx context.Context, scope string, changes []byte) (rt.Delta, error) {
	if err := checkChanges(changes); err != nil {
		return rt.Delta{}, err
	}
	return s.feed.Publish(ctx, scope, changes)
}

func (s *Server) track(cn *conn, open bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		s.live = map[string]map[*conn]struct{}{}
	}
	m := s.live[cn.scope]
	switch {
	case open && m == nil:
		s.live[cn.scope] = map[*conn]struct{}{cn: {}}
	case open:
		m[cn] = struct{}{}
	default:
		delete(m, cn)
		if len(m) == 0 {
			delete(s.live, cn.scope)
		}
	}
}

// EndSession closes every connection of scope with CloseUnauthorized
// (4401) and returns how many it is closing: call it when the user signs out
// or their session is revoked, since an open socket is not authenticated
// again. Their clients wait until asked before they connect again.
//
// Two limits: it is per scope, not per session, so one device's sign-out
// closes the sockets of every device of that user (they reconnect when
// asked, if still signed in); and it closes only this instance's
// connections: with several instances (pgfeed), call it on each, or end
// the session where the upgrade is authenticated so a reconnect fails.
func (s *Server) EndSession(scope string) int {
	s.mu.Lock()
	cs := make([]*conn, 0, len(s.live[scope]))
	for cn := range s.live[scope] {
		cs = append(cs, cn)
	}
	s.mu.Unlock()
	for _, cn := range cs {
		go cn.closeWith(rt.CloseUnauthorized, "session ended") // the handshake waits for the peer
	}
	return len(cs)
}

// Shutdown closes every connection with 1001 (going away) and waits for
// them until ctx ends. New upgrades are refused with 503.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop()
	done := make(chan struct{})
	go func() { s.conns.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ServeHTTP authenticates the upgrade with the receiver's Scope (401 before
// any upgrade when it fails) and serves the connection.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	scope, err := s.rc.Options().Scope(r)
	if err != nil || scope == "" || !receiver.ValidText(scope) {
		writeProblem(w, http.StatusUnauthorized, wire.ProblemUnauthenticated, "Authentication required")
		return
	}
	if s.ctx.Err() != nil {
		writeProblem(w, http.StatusServiceUnavailable, wire.ProblemBusy, "Server shutting down")
		return
	}
	c, err := websocket.Accept(w, r, s.opts.Accept)
	if err != nil {
		return // Accept has answered
	}
	c.SetReadLimit(int64(s.opts.MaxMessage))
	s.conns.Add(1)
	s.accepted.Add(1)
	s.open.Add(1)
	defer func() {
		s.open.Add(-1)
		s.conns.Done()
	}()
	cn := &conn{s: s, c: c, scope: scope, http: r, out: make(chan []byte, 16), done: make(chan struct{})}
	s.track(cn, true)
	defer s.track(cn, false)
	cn.serve()
}

func writeProblem(w http.ResponseWriter, status int, typ, title string) {
	b, _ := json.Marshal(receiver.Problem{Type: typ, Title: title, Status: status})
	w.Header().Set("Content-Type", wire.ContentTypeProblem)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// toReply turns the receiver's answer for mutation id into an ack or reject.
func toReply(id string, resp receiver.Response) rt.Message {
	if resp.Status >= 200 && resp.Status < 300 {
		return rt.Ack{ID: id, Status: uint64(resp.Status), Replayed: resp.Header.Get(wire.HeaderReplayed) == "true", Result: resp.Body}
	}
	var p receiver.Problem
	if json.Unmarshal(resp.Body, &p) != nil || p.Type == "" {
		p = receiver.Problem{Type: "about:blank", Title: http.StatusText(resp.Status)}
	}
	p.Status = resp.Status
	retry := resp.Status >= 500 || p.Type == wire.ProblemInFlight
	return rt.Reject{ID: id, Retry: retry, Problem: rt.Problem{Type: p.Type, Title: p.Title, Detail: p.Detail,
		Status: uint64(p.Status), Highest: p.Highest}}
}

var errClosed = errors.New("realtime: connection closed")
