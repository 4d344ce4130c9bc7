package realtime

import (
	"context"
	"sync/atomic"
	"time"

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
	app    func(Action)
	events chan func(now time.Time) []Action
	socket Socket
	gen    uint64
	ran    chan struct{} // closed when Run returned
}

// NewDriver returns a driver; Run starts it.
func NewDriver(l *Leader, dial Dialer, clock Clock, app func(Action)) *Driver {
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
		}
	}
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

func (d *Driver) perform(ctx context.Context, acts []Action) {
	for len(acts) > 0 {
		a := acts[0]
		acts = acts[1:]
		switch v := a.(type) {
		case Dial:
			go d.dialSocket(ctx, v.Gen)
		case Send:
			if d.socket != nil && v.Gen == d.gen {
				sctx, cancel := context.WithTimeout(ctx, d.leader.cfg.PongTimeout)
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
			d.app(a)
		}
	}
}

// dialSocket dials and hands the socket to the driver's goroutine. A
// socket that opens as the driver stops (its post never runs: ctx ended,
// or it was queued after Run returned) is closed here, so none outlives
// the driver.
func (d *Driver) dialSocket(ctx context.Context, gen uint64) {
	dctx, cancel := context.WithTimeout(ctx, d.leader.cfg.PongTimeout)
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
