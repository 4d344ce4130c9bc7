package locks

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tabfence/tabfence/internal/randid"
)

// Fencer allocates fencing tokens: numbers that increase with every
// leadership of a resource, durably (package idb implements it on
// IndexedDB). Receivers reject writes and messages that carry a lower token
// than one they have seen, which is what makes a stolen-from or frozen old
// leader harmless. Web Locks alone give mutual exclusion only while every
// holder is responsive; tokens make it hold for side effects too.
type Fencer interface {
	AllocateToken(ctx context.Context, resource, ownerID string) (uint64, error)
}

// Config configures an Election.
type Config struct {
	Scope    string // what is led, e.g. a workspace id; part of the lock name
	Protocol int    // protocol version (>= 1); part of the lock name, see Name
	// Resource is the fenced resource; default the lock name.
	Resource string
	// OwnerID identifies this contender in tokens and logs; default a
	// random 128-bit hex id.
	OwnerID string
	// Fencer, when set, allocates a token after the lock is granted and
	// before OnLeader runs. nil means unfenced (Token 0).
	Fencer Fencer
	// OnLeader is called on a new goroutine once this election leads and
	// its token is allocated. l.Ctx ends when leadership ends for any
	// reason; the leader's work must stop then. A panic in OnLeader is
	// recovered and ends the leadership with ReasonError.
	OnLeader func(l *Leadership)
	// OnFollower is called when this election is waiting in the queue
	// because someone else holds the lock.
	//
	// OnFollower and OnLost are delivered in order on one goroutine per
	// election (OnLeader is started from it): return promptly. A panic in
	// them is recovered and printed.
	OnFollower func()
	// OnLost is called when a granted lock is given up: after a
	// leadership ends (reason and a *LostError), when token allocation
	// fails (ReasonError, without OnLeader), and when joining the queue
	// fails (ReasonError). Reported in order with OnFollower, and after
	// the matching OnLeader was started.
	OnLost func(reason Reason, err error)
	// StallAfter turns on the watchdog (0: off; else MinStallAfter to
	// MaxStallAfter, and a Fencer is required): the leader heartbeats on
	// the BroadcastChannel HeartbeatChannel(LockName) — its token and the
	// time, never data — and a follower whose page is visible and that
	// hears no heartbeat for StallAfter steals (see Watchdog). A frozen or
	// hung leader then loses its lock; its late writes are fenced.
	StallAfter time.Duration
}

// Leadership is one term of leadership: the context a leader works under
// and what its side effects must carry.
type Leadership struct {
	// Ctx ends when leadership ends for any reason (stolen, resigned,
	// closed, stepped down, OnLeader panicked). context.Cause(Ctx)
	// matches ErrStolen, ErrClosed, ErrResigned or ErrFenced, or is a
	// *LostError of ReasonError.
	Ctx        context.Context
	LockName   string
	Resource   string
	OwnerID    string
	Token      uint64 // fencing token; 0 when unfenced
	Generation int    // 1 for this election's first leadership, then 2, ...
	StartedAt  time.Time

	cancel context.CancelCauseFunc
}

// StepDown ends this leadership because a write or message carrying its
// token was rejected as stale: a newer leader exists somewhere, and acting
// on would be split-brain. Ctx ends, the lock is released, OnLost reports
// ReasonFenced with err, and the election rejoins the queue after a short
// backoff. Calling it on a leadership that already ended does nothing.
// It never blocks.
func (l *Leadership) StepDown(err error) {
	if l == nil || l.cancel == nil {
		return
	}
	if err == nil {
		err = ErrFenced
	}
	l.cancel(&LostError{Reason: ReasonFenced, Resource: l.Resource, Token: l.Token, Err: err})
}

// backend is what an Election needs from the Web Locks API; tests swap
// in a fake.
type backend struct {
	available func() error
	request   func(ctx context.Context, name string, opts Options, fn func(context.Context) error, queued func()) error
	query     func(ctx context.Context) (Snapshot, error)
	beacon    func(channel string, h beaconHooks) (beacon, error)
}

var platform = backend{available: platformAvailable, request: request, query: Query, beacon: platformBeacon}

// Election is leader election among the tabs (and workers) of one origin on
// an exclusive Web Lock named Name(Scope, Protocol). Several elections in
// one page contend exactly like tabs.
type Election struct {
	cfg      Config
	name     string
	resource string
	owner    string
	be       backend

	ctx    context.Context // cancelled with ErrClosed by Close
	cancel context.CancelCauseFunc
	done   chan struct{}
	kick   chan struct{} // wakes a backoff wait (Steal)
	ev     events
	wd     *watch // nil without a watchdog

	watchOnce sync.Once
	watchErr  error

	mu       sync.Mutex
	m        machine
	leader   *Leadership
	withdraw context.CancelCauseFunc // cancels the current join attempt
	stealers []chan stealResult
}

type stealResult struct {
	l   *Leadership
	err error
}

// errWithdrawn cancels a queued request so it can be reissued with Steal.
var errWithdrawn = errors.New("locks: request withdrawn to steal")

// NewElection validates cfg and builds an election; Start joins the queue.
func NewElection(cfg Config) (*Election, error) { return newElection(cfg, platform) }

func newElection(cfg Config, be backend) (*Election, error) {
	name, err := Name(cfg.Scope, cfg.Protocol)
	if err != nil {
		return nil, err
	}
	if err := ValidStallAfter(cfg.StallAfter, cfg.Fencer != nil); err != nil {
		return nil, err
	}
	e := &Election{cfg: cfg, name: name, resource: cfg.Resource, owner: cfg.OwnerID, be: be,
		done: make(chan struct{}), kick: make(chan struct{}, 1)}
	if e.resource == "" {
		e.resource = name
	}
	if e.owner == "" {
		e.owner = randomID()
	}
	e.ev.wake = make(chan struct{}, 1)
	e.ctx, e.cancel = context.WithCancelCause(context.Background())
	if cfg.StallAfter > 0 {
		e.wd = newWatch(e, cfg.StallAfter)
	}
	return e, nil
}

// openWatch connects the watchdog's beacon once, before the election
// first joins the queue.
func (e *Election) openWatch() error {
	if e.wd == nil {
		return nil
	}
	e.watchOnce.Do(func() { e.watchErr = e.wd.open() })
	return e.watchErr
}

// StallAfter is the watchdog's Config.StallAfter (0: no watchdog).
func (e *Election) StallAfter() time.Duration { return e.cfg.StallAfter }

// WatchStats returns the watchdog's counters (zero without a watchdog).
func (e *Election) WatchStats() WatchStats {
	if e.wd == nil {
		return WatchStats{}
	}
	return e.wd.stats()
}

// randomID is a random 128-bit owner id (see internal/randid for why it
// does not use crypto/rand in the browser).
func randomID() string { return randid.New() }

// LockName is the versioned lock name, "tabfence:<scope>:v<protocol>"; the
// channel package uses the same name.
func (e *Election) LockName() string { return e.name }

// Resource is the fenced resource (Config.Resource or the lock name).
func (e *Election) Resource() string { return e.resource }

// OwnerID is this contender's id.
func (e *Election) OwnerID() string { return e.owner }

// Start joins the lock queue (an exclusive request that waits). It returns
// at once; OnLeader or OnFollower report the outcome. ErrUnavailable
// without navigator.locks; ErrClosed after Close; a second Start does
// nothing.
func (e *Election) Start() error {
	if err := e.be.available(); err != nil {
		return err
	}
	if err := e.openWatch(); err != nil {
		return err
	}
	e.mu.Lock()
	started, err := e.m.start()
	e.mu.Unlock()
	if started {
		e.launch()
	}
	return err
}

func (e *Election) launch() {
	go e.ev.run()
	go e.run()
}

// IsLeader reports whether this election leads now.
func (e *Election) IsLeader() bool {
	e.mu.Lock()
	leading := e.m.leading()
	e.mu.Unlock()
	return leading
}

// Leadership returns the current leadership, or nil when not leading.
func (e *Election) Leadership() *Leadership {
	var l *Leadership
	e.mu.Lock()
	if e.m.leading() {
		l = e.leader
	}
	e.mu.Unlock()
	return l
}

// HasLeader reports whether anyone (this election, another tab, a worker)
// holds the lock, via navigator.locks.query. It waits: call it from a
// goroutine.
func (e *Election) HasLeader(ctx context.Context) (bool, error) {
	s, err := e.be.query(ctx)
	if err != nil {
		return false, err
	}
	return s.Holds(e.name), nil
}

// Resign gives up leadership now: Ctx ends, OnLost(ReasonResigned), the
// lock is released and the election rejoins the queue at the back, so a
// waiting tab gets the lock (if none waits, this one leads again, with a
// new generation and token). Not leading: nothing happens. It never
// blocks. ErrClosed after Close.
func (e *Election) Resign() error {
	e.mu.Lock()
	act := e.m.resignReq()
	l := e.leader
	e.mu.Unlock()
	switch act {
	case resignClosed:
		return ErrClosed
	case resignNow:
		l.cancel(&LostError{Reason: ReasonResigned, Resource: l.Resource, Token: l.Token})
	}
	return nil
}

// Steal takes leadership now, from a holder that is alive but useless
// (frozen, signed out, stuck): a request with steal, which the browser
// grants at once and which rejects the holder's request with AbortError, so
// the old leader's Ctx ends and it reports ReasonStolen. Steal returns once
// this election leads (after the token is allocated), or the error that
// prevented it. A waiting request is withdrawn first; an unstarted election
// is started. Cancelling ctx stops the wait, not a steal already under way.
//
// Steal is safe only with fencing: the old holder may be frozen mid-write
// and finish it later; only a higher token makes that write harmless.
// Steal waits: call it from a goroutine.
func (e *Election) Steal(ctx context.Context) (*Leadership, error) {
	if err := e.be.available(); err != nil {
		return nil, err
	}
	if err := e.openWatch(); err != nil {
		return nil, err
	}
	ch := make(chan stealResult, 1)
	e.mu.Lock()
	act := e.m.stealReq()
	var withdraw context.CancelCauseFunc
	switch act {
	case stealClosed:
		e.mu.Unlock()
		return nil, ErrClosed
	case stealLeading:
		l := e.leader
		e.mu.Unlock()
		return l, nil
	case stealWithdraw:
		withdraw = e.withdraw
	}
	e.stealers = append(e.stealers, ch)
	e.mu.Unlock()

	switch act {
	case stealStart:
		e.launch()
	case stealWithdraw:
		if withdraw != nil {
			withdraw(errWithdrawn)
		}
	case stealWake:
		select {
		case e.kick <- struct{}{}:
		default:
		}
	}
	select {
	case r := <-ch:
		return r.l, r.err
	case <-ctx.Done():
		e.mu.Lock()
		for i, c := range e.stealers {
			if c == ch {
				e.stealers = append(e.stealers[:i], e.stealers[i+1:]...)
				break
			}
		}
		e.mu.Unlock()
		return nil, ctx.Err()
	}
}

// Close leaves the election: releases the lock if held (OnLost
// ReasonClosed; the next waiter leads), withdraws the request if waiting (a
// closed election never becomes leader). It returns at once — safe to call
// from a JavaScript callback — and is idempotent; Done is closed once the
// lock is released and the last callback was delivered.
func (e *Election) Close() error {
	e.mu.Lock()
	first, wasIdle := e.m.close()
	stealers := e.takeStealers()
	e.mu.Unlock()
	if !first {
		return nil
	}
	e.cancel(ErrClosed)
	notify(stealers, nil, ErrClosed)
	if wasIdle {
		close(e.done)
	}
	return nil
}

// Done is closed when a closed election has released everything.
func (e *Election) Done() <-chan struct{} { return e.done }

func (e *Election) takeStealers() []chan stealResult {
	s := e.stealers
	e.stealers = nil
	return s
}

func notify(chs []chan stealResult, l *Leadership, err error) {
	for _, c := range chs {
		c <- stealResult{l, err} // buffered, one send each
	}
}

// run is the election loop: join, hold, rejoin, until closed.
func (e *Election) run() {
	defer func() {
		e.ev.push(func() { close(e.done) })
		e.ev.push(nil)
	}()
	for {
		e.mu.Lock()
		act := e.m.next()
		var actx context.Context
		var cancel context.CancelCauseFunc
		if act.kind == actJoin {
			actx, cancel = context.WithCancelCause(e.ctx)
			e.withdraw = cancel
		}
		e.mu.Unlock()

		switch act.kind {
		case actStop:
			return
		case actWait:
			t := time.NewTimer(act.delay)
			select {
			case <-t.C:
			case <-e.ctx.Done():
			case <-e.kick:
			}
			t.Stop()
			continue
		}

		err := e.join(actx, act.steal)
		if e.wd != nil {
			e.wd.stop() // watching again once the next request queues
		}
		failed := err != nil && actx.Err() == nil && !errors.Is(err, ErrStolen)
		cancel(nil)
		e.mu.Lock()
		e.withdraw = nil
		var stealers []chan stealResult
		if failed {
			e.m.failed()
			stealers = e.takeStealers()
		}
		e.mu.Unlock()
		if failed {
			notify(stealers, nil, err)
			le := &LostError{Reason: ReasonError, Resource: e.resource, Err: err}
			e.ev.push(func() { e.lost(le) })
		}
	}
}

func (e *Election) join(ctx context.Context, steal bool) error {
	if steal {
		return e.be.request(ctx, e.name, Options{Steal: true}, e.hold, nil)
	}
	// Probe first so OnFollower can say "someone else leads": an
	// ifAvailable request does not queue, and the waiting request that
	// follows goes to the back of the queue as it would anyway.
	err := e.be.request(ctx, e.name, Options{IfAvailable: true}, e.hold, nil)
	if !errors.Is(err, ErrNotAcquired) {
		return err
	}
	return e.be.request(ctx, e.name, Options{}, e.hold, e.queued)
}

func (e *Election) queued() {
	if e.wd != nil {
		e.wd.follow()
	}
	e.ev.push(func() {
		if f := e.cfg.OnFollower; f != nil {
			e.safe("OnFollower", f)
		}
	})
}

// hold runs while the lock is held (on its own goroutine, see Request):
// allocate the token, lead until the leadership context ends, report, and
// return to release the lock.
func (e *Election) hold(ctx context.Context) error {
	e.mu.Lock()
	if ctx.Err() != nil { // withdrawn (Close, Steal) just as it was granted
		e.mu.Unlock()
		return nil
	}
	gen, ok := e.m.granted()
	e.mu.Unlock()
	if !ok {
		return nil
	}
	if e.wd != nil {
		e.wd.stop()
	}

	var token uint64
	var aerr error
	if f := e.cfg.Fencer; f != nil {
		token, aerr = e.allocate(ctx, f)
	}
	lctx, lcancel := context.WithCancelCause(ctx)
	defer lcancel(context.Canceled)
	l := &Leadership{Ctx: lctx, LockName: e.name, Resource: e.resource, OwnerID: e.owner,
		Token: token, Generation: gen, StartedAt: time.Now(), cancel: lcancel}

	var cause error
	e.mu.Lock()
	switch {
	case ctx.Err() != nil:
		cause = context.Cause(ctx)
	case aerr != nil:
		cause = &LostError{Reason: ReasonError, Err: aerr}
	default:
		var lead bool
		if lead, cause = e.m.allocated(); lead {
			e.leader = l
			stealers := e.takeStealers()
			e.mu.Unlock()
			if e.wd != nil {
				e.wd.lead(l) // heartbeats until lctx ends
			}
			notify(stealers, l, nil)
			e.ev.push(func() { go e.onLeader(l) })
			<-lctx.Done()
			cause = context.Cause(lctx)
			e.mu.Lock()
			e.leader = nil
		}
	}
	le := classify(cause)
	le.Resource, le.Token = e.resource, token
	e.m.ended(le.Reason)
	stealers := e.takeStealers()
	e.mu.Unlock()
	notify(stealers, nil, le)
	lcancel(le)
	e.ev.push(func() { e.lost(le) })
	return nil
}

func (e *Election) allocate(ctx context.Context, f Fencer) (tok uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicErr("Fencer.AllocateToken", r)
		}
	}()
	return f.AllocateToken(ctx, e.resource, e.owner)
}

func (e *Election) onLeader(l *Leadership) {
	defer func() {
		if r := recover(); r != nil {
			l.cancel(&LostError{Reason: ReasonError, Resource: l.Resource, Token: l.Token, Err: panicErr("OnLeader", r)})
		}
	}()
	if f := e.cfg.OnLeader; f != nil {
		f(l)
	}
}

func (e *Election) lost(le *LostError) {
	if f := e.cfg.OnLost; f != nil {
		e.safe("OnLost", func() { f(le.Reason, le) })
	}
}

// safe runs a user callback, logging a panic instead of dying with it.
func (e *Election) safe(where string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			// No OnLost for a panic in OnLost; print (console.error in a
			// browser) without importing a logger.
			println(panicErr(where, r).Error() + " (election " + e.name + ", recovered)")
		}
	}()
	f()
}

// events delivers callbacks one at a time, in order, on one goroutine.
type events struct {
	mu   sync.Mutex
	q    []func()
	wake chan struct{}
}

func (v *events) push(f func()) {
	v.mu.Lock()
	v.q = append(v.q, f)
	v.mu.Unlock()
	select {
	case v.wake <- struct{}{}:
	default:
	}
}

// run delivers until it meets a nil func.
func (v *events) run() {
	for {
		v.mu.Lock()
		if len(v.q) == 0 {
			v.mu.Unlock()
			<-v.wake
			continue
		}
		f := v.q[0]
		v.q[0] = nil
		v.q = v.q[1:]
		v.mu.Unlock()
		if f == nil {
			return
		}
		f()
	}
}
