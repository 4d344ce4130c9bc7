//go:build js && wasm

package browser

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/locks"
	"github.com/tabfence/tabfence/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// Conn is one tab's handle on the browser's realtime connection.
type Conn struct {
	cfg   Config
	names Names
	id    string // this tab's owner id in the election
	db    *idb.DB
	ch    *channel.Channel
	el    *locks.Election
	fseq  *channel.Sequencer // this tab's own requests (mutation, status?, offline)
	ctx   context.Context    // ends with the connection
	stop  context.CancelFunc

	mu      sync.Mutex
	fol     realtime.Follower
	pend    *realtime.Pending
	madeAt  map[string]time.Time
	term    uint64          // this tab's terms as leader (the newest one owns leading, lead, early)
	leading bool            // this tab won the lock (lead is set once it is ready)
	lead    *leaderRun      // this tab's leader, while it leads
	early   []rt.Mutation   // mutations heard while the leader starts
	remote  leaderView      // the leader's status as announced
	own     map[string]bool // ids of the unsettled mutations this tab made

	testSettled func(id string) bool // tests: stop a settled announcement
	offline     bool
	closed      Closed

	status  listeners[Status]
	deltas  listeners[rt.Delta]
	reloads listeners[uint64]
	pendL   listeners[[]PendingMutation]
	notify  *notifier
	closers []func() // what Open made, torn down by shutdown (last first)
	shut    bool     // shutdown ran: what is made later is torn down at once

	badMessages, badChanges atomic.Uint64
	droppedMutations        atomic.Uint64
}

// leaderView is what the leader announces of itself.
type leaderView struct {
	state   State
	token   uint64
	id      string
	lastErr string
}

// Stats counts what a connection dropped: channel messages that did not
// validate (another build, a hostile script) and deltas whose changes did
// not (ErrChanges).
type Stats struct {
	BadMessages uint64
	BadChanges  uint64
	// DroppedMutations counts other tabs' mutations dropped because
	// MaxPending were pending already (a flood of new ids).
	DroppedMutations uint64
	Channel          channel.Stats
}

// Record is one replica record as Read returns it.
type Record struct {
	Key   string
	Value js.Value
}

// Open joins the connection of cfg.Scope: it opens the replica's database,
// subscribes to the channel before it loads (buffering what arrives), loads
// the replica's version and the pending mutations, and joins the election;
// the tab that leads opens the WebSocket.
func Open(ctx context.Context, cfg Config) (*Conn, error) {
	cfg, names, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	c := &Conn{cfg: cfg, names: names, id: channel.NewID(), pend: realtime.NewPending(), madeAt: map[string]time.Time{}}
	c.fseq = channel.NewSequencer(tabResource(names.Lock, c.id), c.id, 1)
	c.ctx, c.stop = context.WithCancel(context.Background())
	c.remote.state = StateConnecting
	c.notify = &notifier{every: cfg.HiddenNotify, hidden: pageHidden, fire: func() { c.status.call(c.Status()) }}
	// The database may be deleted while Open waits (dbEvent then ends the
	// connection): each step registers its teardown, and Open stops at
	// the first one made after the end.
	if c.db, err = openDB(ctx, cfg, names.Database, c.dbEvent); err != nil {
		c.stop()
		return nil, err
	}
	db := c.db
	if !c.adopt(func() { _ = db.Close() }) || !c.adopt(c.notify.stop) {
		return nil, c.failOpen(ErrClosed)
	}
	if c.ch, err = channel.Open(names.Lock, channel.Buffered()); err != nil {
		return nil, c.failOpen(err)
	}
	ch := c.ch
	if !c.adopt(func() { _ = ch.Close() }) || !c.adopt(c.ch.Subscribe(c.onMessage)) {
		return nil, c.failOpen(ErrClosed)
	}
	l, err := c.load(ctx)
	if err != nil {
		return nil, c.failOpen(err)
	}
	c.fol.Loaded(l.version)
	c.offline = l.offline
	for _, pm := range l.pending {
		c.addPending(pm.Mutation.wire(), pm.MadeAt)
	}
	c.ch.Replay()
	if err := c.join(); err != nil {
		return nil, c.failOpen(err)
	}
	if !c.watchPage() {
		return nil, c.failOpen(ErrClosed)
	}
	c.post("rt.status?", js.Global().Get("Object").New())
	return c, nil
}

func (m Mutation) wire() rt.Mutation {
	return rt.Mutation{ID: m.ID, Op: m.Op, Entity: m.Entity, Payload: m.Payload}
}

// join starts the fenced election: the winner runs the leader.
func (c *Conn) join() error {
	el, err := locks.NewElection(locks.Config{
		Scope: "rt-" + c.cfg.Scope, Protocol: c.cfg.Protocol, Resource: c.names.Resource, OwnerID: c.id,
		Fencer: c.db, StallAfter: c.cfg.StallAfter,
		OnLeader: c.runLeader,
	})
	if err != nil {
		return join(ErrConfig, err)
	}
	c.mu.Lock()
	c.el = el
	c.mu.Unlock()
	if !c.adopt(func() { _ = el.Close() }) {
		return ErrClosed
	}
	return el.Start()
}

// adopt registers closer for shutdown; once shutdown ran it runs closer at
// once and reports false.
func (c *Conn) adopt(closer func()) bool {
	c.mu.Lock()
	if !c.shut {
		c.closers = append(c.closers, closer)
		c.mu.Unlock()
		return true
	}
	c.mu.Unlock()
	closer()
	return false
}

// failOpen ends a connection whose Open failed: ErrClosed when it ended
// meanwhile (the database was deleted or upgraded).
func (c *Conn) failOpen(err error) error {
	c.mu.Lock()
	why := c.closed
	c.mu.Unlock()
	c.shutdown()
	if why != ClosedNot {
		return joinWhy(ErrClosed, string(why)+" while opening")
	}
	return err
}

// dbEvent hears another tab delete the database (a sign-out), a newer
// build upgrade it, or the browser close it: this tab's connection ends,
// and a leader lets go.
func (c *Conn) dbEvent(e idb.Event) {
	switch e.Kind {
	case idb.Deleted:
		c.end(ClosedDeleted)
	case idb.Upgraded:
		c.end(ClosedUpgraded)
	case idb.ClosedByBrowser:
		c.end(ClosedStorage)
	}
}

// end closes the connection for why (once): the election is closed, which
// releases the lock and stops this tab's leader.
func (c *Conn) end(why Closed) {
	c.mu.Lock()
	if c.closed != ClosedNot {
		c.mu.Unlock()
		return
	}
	c.closed = why
	c.mu.Unlock()
	c.shutdown()
	c.status.call(c.Status())
}

func (c *Conn) shutdown() {
	c.stop()
	c.mu.Lock()
	c.shut = true
	closers := c.closers
	c.closers = nil
	c.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
}

// Names are the lock, channel and database names of c.
func (c *Conn) Names() Names { return c.names }

// Stats are c's counters of dropped input.
func (c *Conn) Stats() Stats {
	return Stats{BadMessages: c.badMessages.Load(), BadChanges: c.badChanges.Load(),
		DroppedMutations: c.droppedMutations.Load(), Channel: c.ch.Stats()}
}

// Status is this tab's view of the connection.
func (c *Conn) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{ID: c.id, Version: c.fol.Version(), Pending: c.pend.Len(),
		OldestPending: c.pend.OldestAge(time.Now()), Closed: c.closed, Offline: c.offline}
	if c.lead != nil {
		v := c.lead.view()
		s.Leader, s.State, s.Token, s.LeaderID, s.LastError = true, v.state, v.token, v.id, v.lastErr
	} else {
		s.State, s.Token, s.LeaderID, s.LastError = c.remote.state, c.remote.token, c.remote.id, c.remote.lastErr
	}
	if c.closed != ClosedNot {
		s.State, s.Leader = StateClosed, false
	}
	return s
}

// OnStatus calls fn when the status changes (a hidden tab: at most every
// Config.HiddenNotify). It returns the function that unsubscribes.
func (c *Conn) OnStatus(fn func(Status)) (unsubscribe func()) { return c.status.add(fn) }

// OnDelta calls fn with every delta, in version order, once the replica
// holds it (Changes is the JSON change list, see the package doc).
// Listeners run on the connection's goroutines (in the leader's tab, the
// one that reads the socket): return promptly.
func (c *Conn) OnDelta(fn func(d rt.Delta)) (unsubscribe func()) { return c.deltas.add(fn) }

// OnReload calls fn when this tab missed deltas, or the server reset the
// replica: reread the replica (Read), which holds at least version.
func (c *Conn) OnReload(fn func(version uint64)) (unsubscribe func()) { return c.reloads.add(fn) }

// OnPending calls fn with the pending mutations (of every tab) when they
// change.
func (c *Conn) OnPending(fn func([]PendingMutation)) (unsubscribe func()) { return c.pendL.add(fn) }

// Pending lists the pending mutations, oldest first.
func (c *Conn) Pending(ctx context.Context) ([]PendingMutation, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, ErrClosed
	}
	return c.pendingList(), nil
}

func (c *Conn) pendingList() []PendingMutation {
	c.mu.Lock()
	defer c.mu.Unlock()
	list := c.pend.List()
	out := make([]PendingMutation, 0, len(list))
	for _, m := range list {
		out = append(out, PendingMutation{Mutation: Mutation{ID: m.ID, Op: m.Op, Entity: m.Entity, Payload: m.Payload}, MadeAt: c.madeAt[m.ID]})
	}
	return out
}

// addPending lists m in this tab (once) and returns its outcome's channel.
func (c *Conn) addPending(m rt.Mutation, madeAt time.Time) <-chan realtime.Outcome {
	c.mu.Lock()
	had := c.pend.Has(m.ID)
	ch := c.pend.Add(m, madeAt)
	if !had {
		c.madeAt[m.ID] = madeAt
	}
	c.mu.Unlock()
	if !had {
		c.changedPending()
	}
	return ch
}

// settle ends id in this tab (its waiting Mutate returns).
func (c *Conn) settle(id string, o realtime.Outcome) {
	c.mu.Lock()
	ok := c.pend.Settle(id, o)
	delete(c.madeAt, id)
	delete(c.own, id)
	c.mu.Unlock()
	if ok {
		c.changedPending()
	}
}

func (c *Conn) changedPending() {
	if c.pendL.any() { // the list costs O(pending): only for a listener
		c.pendL.call(c.pendingList())
	}
	c.notify.kick()
}

// Mutate stores m in the pending store, shows it in every tab and waits for
// its ack, sent by whichever tab leads (now or after a failover). A reject
// is a *RejectError.
func (c *Conn) Mutate(ctx context.Context, m Mutation) (rt.Ack, error) {
	if c.ctx.Err() != nil {
		return rt.Ack{}, ErrClosed
	}
	if m.ID == "" {
		m.ID = channel.NewID()
	}
	if m.Entity == "" {
		m.Entity = m.Op // the wire names an entity; an app that has none names the op
	}
	wm := m.wire()
	if err := checkMutation(wm); err != nil {
		return rt.Ack{}, join(ErrInvalid, err)
	}
	now := time.Now()
	if err := c.storePending(ctx, wm, now); err != nil {
		return rt.Ack{}, err
	}
	c.markOwn(wm.ID) // before it is listed: a settle may follow at once
	done := c.addPending(wm, now)
	c.post("rt.mutation", encodePending(wm, now))
	c.mu.Lock()
	lr, leading := c.lead, c.leading
	if leading && lr == nil {
		c.early = append(c.early, wm)
	}
	c.mu.Unlock()
	if lr != nil {
		go lr.mutate(wm)
	}
	select {
	case o := <-done:
		if o.Missed() {
			return rt.Ack{}, ErrOutcomeMissed
		}
		if o.Reject != nil {
			return rt.Ack{}, &RejectError{ID: m.ID, Problem: o.Reject.Problem}
		}
		return *o.Ack, nil
	case <-ctx.Done():
		return rt.Ack{}, ctx.Err()
	case <-c.ctx.Done():
		return rt.Ack{}, ErrClosed
	}
}

// post sends one of this tab's requests on the channel.
func (c *Conn) post(kind string, payload js.Value) {
	if c.fseq != nil {
		_, _ = c.ch.Send(c.fseq, kind, payload)
	}
}

// Retry asks the leader for its status; an unauthorized leader then tries
// to connect again (the person may have signed in again in this tab).
func (c *Conn) Retry() {
	c.mu.Lock()
	lr := c.lead
	c.mu.Unlock()
	if lr != nil {
		go lr.asked()
		return
	}
	c.post("rt.status?", js.Global().Get("Object").New())
}

// SetOffline is the app's "work offline" switch, for the whole browser:
// while on, the leader (this tab's or another's, now or after a failover)
// closes its socket and does not dial; mutations wait in the pending store.
// Off: the leader dials at once.
func (c *Conn) SetOffline(ctx context.Context, offline bool) error {
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	if err := c.setOfflineRow(ctx, offline); err != nil {
		return err
	}
	p := js.Global().Get("Object").New()
	p.Set("offline", offline)
	c.post("rt.offline", p)
	c.applyOffline(offline)
	return nil
}

func (c *Conn) applyOffline(offline bool) {
	c.mu.Lock()
	c.offline = offline
	lr := c.lead
	c.mu.Unlock()
	if lr != nil {
		lr.setOffline(offline)
	}
	c.notify.kick()
}

// SignOut deletes the replica's database: every tab's connection closes
// (ClosedDeleted) and the leader releases its lock.
func (c *Conn) SignOut(ctx context.Context) error {
	if c.ctx.Err() != nil {
		return ErrClosed
	}
	return idb.Delete(ctx, c.names.Database, nil)
}

// Close leaves the connection (a leader releases its lock; the next tab
// leads and connects).
func (c *Conn) Close(ctx context.Context) error {
	c.end(ClosedByApp)
	c.mu.Lock()
	el := c.el
	c.mu.Unlock()
	if el != nil {
		select {
		case <-el.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// pageHidden reports document.hidden (false where there is no document).
func pageHidden() bool {
	d := js.Global().Get("document")
	return d.Type() == js.TypeObject && d.Get("hidden").Truthy()
}

// watchPage passes the page's online and visible events to the leader;
// false when the connection ended meanwhile (the listeners are removed).
func (c *Conn) watchPage() bool {
	ok := true
	listen := func(target js.Value, event string, fn func()) {
		if target.Type() != js.TypeObject {
			return
		}
		cb := jsglue.NewCallback(func(js.Value, []js.Value) any { go fn(); return nil })
		target.Call("addEventListener", event, cb.Value)
		ok = c.adopt(func() {
			target.Call("removeEventListener", event, cb.Value)
			cb.Release()
		}) && ok
	}
	listen(js.Global(), "online", func() { c.toLeader(func(d *realtime.Driver) { d.Online(c.ctx) }) })
	listen(js.Global().Get("document"), "visibilitychange", func() {
		if !pageHidden() {
			c.toLeader(func(d *realtime.Driver) { d.Visible(c.ctx) })
			c.notify.kick()
		}
	})
	return ok
}

func (c *Conn) toLeader(fn func(*realtime.Driver)) {
	c.mu.Lock()
	lr := c.lead
	c.mu.Unlock()
	if lr != nil {
		if d := lr.driver(); d != nil {
			fn(d)
		}
	}
}
