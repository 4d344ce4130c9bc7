package realtime

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/tabfence/tabfence/internal/deadline"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// Socket is one open connection, as the driver needs it. Recv returns the
// next message's bytes; when the connection ends it returns an error from
// which CloseCode reads the close code.
type Socket interface {
	Send(ctx context.Context, b []byte) error
	Recv(ctx context.Context) ([]byte, error)
	Close(reason string)
	CloseCode(err error) int
}

// Dialer opens a socket; an upgrade refused with 401 returns an error
// wrapping ErrUnauthorized.
type Dialer func(ctx context.Context) (Socket, error)

// Clock is the driver's time: Now and a timer channel.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// WallClock is real time.
var WallClock Clock = wallClock{}

// Driver runs a Leader over real sockets: it performs the machine's
// socket actions itself and hands the others (Deliver, ResetReplica,
// Settled, StateChanged) to the app's callback, on the driver's goroutine.
type Driver struct {
	leader *Leader
	dial   Dialer
	clock  Clock
	app    func([]Action)
	events chan func(now time.Time) []Action
	socket Socket
	gen    uint64
	batch  []Action      // app actions not handed over yet
	failed bool          // set by AppFailed during the app's callback
	held   uint64        // the replica's version once the app performed every batch so far
	ran    chan struct{} // closed when Run returned
}

// maxDrain bounds the events one batch gathers, so timers still run.
const maxDrain = 64

// NewDriver returns a driver that hands the app one action at a time;
// Run starts it.
func NewDriver(l *Leader, dial Dialer, clock Clock, app func(Action)) *Driver {
	var d *Driver
	d = NewBatchDriver(l, dial, clock, func(acts []Action) {
		for _, a := range acts {
			if d.failed {
				return // nothing after a failed action may run
			}
			app(a)
		}
	})
	return d
}

// NewBatchDriver returns a driver that hands the app its actions in
// batches: the app actions of every event already queued when the driver
// gets to them (messages that arrived while the app was busy), in order,
// up to the next socket action. An app that writes a batch in one
// transaction pays one commit for many deltas or acks; a lone event is
// handed over at once, with no wait for company.
func NewBatchDriver(l *Leader, dial Dialer, clock Clock, app func([]Action)) *Driver {
	if clock == nil {
		clock = WallClock
	}
	return &Driver{leader: l, dial: dial, clock: clock, app: app, events: make(chan func(time.Time) []Action, 64), ran: make(chan struct{})}
}

// Run drives the leader until ctx ends, then closes the socket.
func (d *Driver) Run(ctx context.Context) {
	defer func() {
		if d.socket != nil {
			d.socket.Close("leader stopped")
		}
		close(d.ran)
	}()
	d.perform(ctx, d.leader.Start(d.clock.Now()))
	for {
		for f := d.flush(); len(f) > 0; f = d.flush() {
			d.perform(ctx, f)
		}
		var timer <-chan time.Time
		if dl := d.leader.Deadline(); !dl.IsZero() {
			timer = d.clock.After(max(dl.Sub(d.clock.Now()), 0))
		}
		select {
		case <-ctx.Done():
			return
		case <-timer:
			d.perform(ctx, d.leader.Tick(d.clock.Now()))
		case ev := <-d.events:
			d.perform(ctx, ev(d.clock.Now()))
			d.drain(ctx)
		}
	}
}

// drain performs the events already queued, without waiting for more.
func (d *Driver) drain(ctx context.Context) {
	for range maxDrain {
		select {
		case ev := <-d.events:
			d.perform(ctx, ev(d.clock.Now()))
		default:
			return
		}
	}
}

// flush hands the app the actions gathered so far. When the app could
// not perform them (AppFailed), the leader goes back to the version the
// replica held before the batch (a batch may hold several deltas) and
// flush returns what it does then: nothing else of the batch's events may
// run, it would build on a version the replica lacks.
func (d *Driver) flush() []Action {
	if len(d.batch) == 0 {
		return nil
	}
	b := d.batch
	d.batch = nil
	d.failed = false
	d.app(b)
	if !d.failed {
		return nil
	}
	d.failed = false
	d.leader.rewind = d.held
	return d.leader.Failed(d.clock.Now(), d.leader.gen)
}

// post runs f on the driver's goroutine; it waits while the driver is busy.
func (d *Driver) post(ctx context.Context, f func(now time.Time) []Action) {
	select {
	case d.events <- f:
	case <-ctx.Done():
	}
}

// Mutate hands the leader a mutation; its outcome arrives on the channel.
func (d *Driver) Mutate(ctx context.Context, m rt.Mutation) <-chan Outcome {
	got := make(chan (<-chan Outcome), 1)
	d.post(ctx, func(now time.Time) []Action {
		ch, acts := d.leader.Mutate(now, m)
		got <- ch
		return acts
	})
	select {
	case ch := <-got:
		return ch
	case <-ctx.Done():
		return nil
	}
}

// Online, Visible and Retry pass the page's events to the leader.
func (d *Driver) Online(ctx context.Context)  { d.post(ctx, d.leader.Online) }
func (d *Driver) Visible(ctx context.Context) { d.post(ctx, d.leader.Visible) }
func (d *Driver) Retry(ctx context.Context)   { d.post(ctx, d.leader.Retry) }

// AppFailed is called by the app's callback, on the driver's goroutine,
// when it could not perform a Deliver or ResetReplica it was handed; held
// is the version the replica holds (part of a batch may have committed).
// The leader then drops the socket and redials from held (see
// Leader.Failed).
func (d *Driver) AppFailed(held uint64) { d.failed, d.held = true, held }

func (d *Driver) perform(ctx context.Context, acts []Action) {
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		switch a.(type) {
		case Dial, Send, CloseSocket:
			// In order: what the app was handed before happens first.
			if f := d.flush(); f != nil {
				// Nothing else of the failed batch's events runs, but a
				// socket the machine already let go is still closed.
				if _, ok := a.(CloseSocket); ok {
					f = append([]Action{a}, f...)
				}
				acts = f
				continue
			}
		}
		switch v := a.(type) {
		case Dial:
			go d.dialSocket(ctx, v.Gen)
		case Send:
			if d.socket != nil && v.Gen == d.gen {
				sctx, cancel := deadline.WithTimeout(ctx, d.leader.cfg.PongTimeout)
				err := d.socket.Send(sctx, rt.Encode(v.Msg))
				cancel()
				if err != nil {
					acts = append(acts, d.leader.Closed(d.clock.Now(), v.Gen, -1)...)
				}
			}
		case CloseSocket:
			if d.socket != nil && v.Gen == d.gen {
				d.socket.Close(v.Reason)
				d.socket = nil
			}
		default:
			d.batch = append(d.batch, a)
		}
	}
}

// dialSocket dials and hands the socket to the driver's goroutine. A
// socket that opens as the driver stops (its post never runs: ctx ended,
// or it was queued after Run returned) is closed here, so none outlives
// the driver.
func (d *Driver) dialSocket(ctx context.Context, gen uint64) {
	dctx, cancel := deadline.WithTimeout(ctx, d.leader.cfg.PongTimeout)
	s, err := d.dial(dctx)
	cancel()
	var claim atomic.Bool // whoever claims first owns s: the driver or this cleanup
	ran := make(chan struct{})
	d.post(ctx, func(now time.Time) []Action {
		defer close(ran)
		if !claim.CompareAndSwap(false, true) {
			return nil
		}
		if err == nil && gen != d.leader.gen {
			s.Close("superseded") // the machine gave up on this dial
			return nil
		}
		if err == nil {
			d.socket, d.gen = s, gen
			go d.recvLoop(ctx, s, gen)
		}
		return d.leader.Dialed(now, gen, err)
	})
	if err != nil {
		return
	}
	select {
	case <-ran:
	case <-d.ran:
		if claim.CompareAndSwap(false, true) {
			s.Close("leader stopped")
		}
	}
}

func (d *Driver) recvLoop(ctx context.Context, s Socket, gen uint64) {
	for {
		b, err := s.Recv(ctx)
		if err != nil {
			code := s.CloseCode(err)
			d.post(ctx, func(now time.Time) []Action { return d.leader.Closed(now, gen, code) })
			return
		}
		m, err := rt.Decode(b, 0)
		if err != nil {
			d.post(ctx, func(now time.Time) []Action { return d.leader.lostIf(now, gen, "malformed message") })
			return
		}
		d.post(ctx, func(now time.Time) []Action { return d.leader.Received(now, gen, m) })
	}
}
