//go:build js && wasm

package outbox

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/idb"
	"github.com/tabfence/tabfence/internal/deadline"
	"github.com/tabfence/tabfence/internal/randid"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/locks"
)

// RuntimeConfig configures a Runtime: one tab's (or one instance's) handle
// on a shared, durable outbox in the browser.
type RuntimeConfig struct {
	// Name is the queue scope: with Protocol it names the IndexedDB
	// database, the Web Lock, the BroadcastChannel, the lease and the
	// server fencing resource (Names, FenceResource).
	Name string
	// Protocol (default 1) separates queues a deploy made incompatible:
	// tabs of different protocols share none of the names above.
	Protocol int
	// Outbox configures the queue (Policies are required). Name, Store,
	// Transport and Events are filled in by the Runtime when empty.
	Outbox Config
	// BaseURL prefixes endpoint paths (default: the page's origin).
	BaseURL string
	// FencePath is where server fencing tokens are issued: the flush owner
	// POSTs FencePath+resource on taking over (default "/fence/").
	FencePath string
	// Authorize adds credentials to every request at send time (the
	// records and the fence requests), for req.UserID. Nothing it adds is
	// ever stored.
	Authorize func(ctx context.Context, req Request, h Header) error
	// SendTimeout bounds one request (default 30 s): a hung request
	// becomes a retryable network error.
	SendTimeout time.Duration
	// Watch tunes frozen-owner detection (default: ask after 1 s without
	// progress, steal after 1.5 s without an answer).
	Watch WatchConfig
	// Session logs in at once when UserID is set.
	Session Session
	// NoWebLocks forces the IndexedDB lease fallback (as without
	// navigator.locks).
	NoWebLocks bool
	// StatusDebounce coalesces status refreshes (default 100 ms).
	StatusDebounce time.Duration
	// Store, when set, is used instead of opening Names(Name, Protocol).Database.
	Store Store
	// AckedRetention is how long acked records stay before the flush owner
	// compacts them (Outbox.Compact, at most once a minute); default
	// DefaultAckedRetention.
	AckedRetention time.Duration
}

// RuntimeStatus is what every tab renders: the shared projection read from
// the Store, plus who flushes.
type RuntimeStatus struct {
	Projection
	Owner      bool   // this runtime holds the flush lock now
	OwnerID    string // the current (or last) flush owner, from the lease row
	LeaseToken uint64 // its local lease token
	FenceToken uint64 // its server fencing token (known when announced)
	Flushing   bool   // this runtime is flushing now
	ID         string // this runtime's owner id
}

// Runtime runs an Outbox in the browser: IndexedDB store, fetch transport,
// a flush owner elected per flush with a Web Lock (ifAvailable; the
// IndexedDB lease where navigator.locks is missing), triggers (online,
// visible, focus, OUTBOX_CHANGED broadcasts, the next-due timer, Flush),
// status pushed to every tab, and frozen-owner detection.
type Runtime struct {
	cfg       RuntimeConfig
	ob        *Outbox
	store     Store
	ownStore  bool
	transport Transport
	ch        *channel.Channel
	seq       *channel.Sequencer
	id        string
	lockName  string

	ctx    context.Context
	cancel context.CancelFunc

	kickCh  chan string
	stealCh chan struct{}
	dirtyCh chan struct{}
	wdWake  chan struct{}
	dueT    *time.Timer
	evCh    chan Event

	// Work an enqueue leaves to the next task (see later): the
	// OUTBOX_CHANGED announcement, the local flush hint and event delivery.
	laterMu      sync.Mutex
	laterPending bool        // a task is scheduled and has not run yet
	announce     bool        // an enqueue committed since the last announcement
	laterEvents  []Event     // events to deliver (see onEvent)
	announcedAt  time.Time   // last OUTBOX_CHANGED post (see announceChanged)
	announceT    *time.Timer // the trailing announcement, when armed
	laterPort    js.Value    // MessageChannel port2: a message schedules the task
	laterStop    func()
	appendHook   changeHook // OnAppendChange

	attemptMu    sync.Mutex
	mu           sync.Mutex
	owning       bool
	flushing     bool
	busy         bool // inside ownAndFlush (taking ownership or flushing)
	lease        Lease
	lastStep     time.Time // owner: last time a step of its flush finished
	contended    bool      // our last attempt found the lock held
	dirtyLocal   bool
	dirtyRemote  bool
	wd           *Watchdog
	last         RuntimeStatus
	remoteFence  uint64
	remoteOwner  string
	fenceRetryAt time.Time
	fenceFails   int
	compactedAt  time.Time
	readCost     time.Duration // of the last status read
	readingSince time.Time     // a status read is outstanding since
	subsN        int
	statusSubs   map[int]func(RuntimeStatus)
	eventSubs    map[int]func(Event)

	listeners []func()
	unsub     func()
	closed    atomic.Bool

	// mute (tests): ignore status questions, as a frozen tab does.
	mute atomic.Bool
	// frozen: between the page's freeze and resume events.
	frozen atomic.Bool
}

// kindStolen announces a steal of the flush lock (before the thief touches
// IndexedDB).
const kindStolen = "stolen!"

// Errors of the Runtime.
var (
	// ErrFenceUnavailable: the server fencing token could not be obtained
	// (offline, server down): nothing was sent, nothing was charged.
	ErrFenceUnavailable = errors.New("outbox: fencing token unavailable")
	// ErrRuntimeClosed: Close was called.
	ErrRuntimeClosed = errors.New("outbox: runtime closed")
)

// OpenRuntime opens the queue's store and channel, installs the triggers and
// starts flushing when the queue has due work.
func OpenRuntime(ctx context.Context, cfg RuntimeConfig) (*Runtime, error) {
	if cfg.Name == "" {
		return nil, ErrInvalidRecord
	}
	if cfg.Protocol <= 0 {
		cfg.Protocol = 1
	}
	if cfg.FencePath == "" {
		cfg.FencePath = "/fence/"
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 30 * time.Second
	}
	if cfg.StatusDebounce <= 0 {
		cfg.StatusDebounce = 100 * time.Millisecond
	}
	names, err := Names(cfg.Name, cfg.Protocol)
	if err != nil {
		return nil, err
	}
	lockName := names.Lock
	r := &Runtime{
		cfg: cfg, id: randid.New(), lockName: lockName,
		kickCh: make(chan string, 1), stealCh: make(chan struct{}, 1), dirtyCh: make(chan struct{}, 1),
		wdWake: make(chan struct{}, 1),
		evCh:   make(chan Event, 4096), wd: NewWatchdog(cfg.Watch),
		statusSubs: map[int]func(RuntimeStatus){}, eventSubs: map[int]func(Event){},
	}
	r.store = cfg.Store
	if r.store == nil {
		st, err := OpenIDBStore(ctx, names.Database)
		if err != nil {
			return nil, err
		}
		r.store, r.ownStore = st, true
	}
	ft := &FetchTransport{BaseURL: cfg.BaseURL, Authorize: cfg.Authorize}
	r.transport = TransportFunc(func(ctx context.Context, req Request) (Response, error) {
		ctx, cancel := deadline.WithTimeout(ctx, cfg.SendTimeout)
		defer cancel()
		return ft.Send(ctx, req)
	})
	oc := cfg.Outbox
	oc.Name, oc.Protocol = cfg.Name, cfg.Protocol
	if oc.Store == nil {
		oc.Store = r.store
	}
	if oc.Transport == nil {
		oc.Transport = r.transport
	}
	user := oc.Events
	oc.Events = EventsFunc(func(e Event) {
		if user != nil {
			user.Emit(e)
		}
		r.onEvent(e)
	})
	if r.ob, err = New(oc); err != nil {
		r.closeStore()
		return nil, err
	}
	r.ob.OnSessionChange(r.appendHook.call)
	if r.ch, err = channel.Open(lockName); err != nil {
		r.closeStore()
		return nil, err
	}
	r.seq = channel.NewSequencer("outbox-tab:"+r.id, r.id, 1)
	r.unsub = r.ch.Subscribe(r.onMessage)
	if err := r.openSession(ctx, cfg.Session); err != nil {
		r.unsub()
		_ = r.ch.Close()
		r.closeStore()
		return nil, err
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.dueT = time.NewTimer(time.Hour)
	r.dueT.Stop()
	r.installLater()
	r.installTriggers()
	go r.flushLoop()
	go r.statusLoop()
	go r.watchLoop()
	go r.eventLoop()
	r.markDirty(false)
	r.Kick("start")
	return r, nil
}

func (r *Runtime) closeStore() {
	if c, ok := r.store.(interface{ Close() error }); ok && r.ownStore {
		_ = c.Close()
	}
}

// ID is this runtime's owner id (lease owner, channel sender).
func (r *Runtime) ID() string { return r.id }

// Outbox returns the underlying queue.
func (r *Runtime) Outbox() *Outbox { return r.ob }

// LockName is the Web Lock (and channel) name.
func (r *Runtime) LockName() string { return r.lockName }

// Protocol is the queue's protocol (see Names).
func (r *Runtime) Protocol() int { return r.cfg.Protocol }

// Close stops the triggers and loops, releases the lock if held (an ongoing
// flush is cancelled; its claimed records go back to the queue or are
// recovered by the next owner) and closes the store and the channel.
func (r *Runtime) Close() error {
	if !r.closed.CompareAndSwap(false, true) {
		return nil
	}
	r.appendHook.call()
	r.cancel()
	for _, rm := range r.listeners {
		rm()
	}
	r.unsub()
	_ = r.ch.Close()
	r.closeStore()
	return nil
}

// ---- app API ----

// Login makes s the queue's session in every tab (see session.go),
// announces it, and flushes.
func (r *Runtime) Login(ctx context.Context, s Session) error {
	ns, err := r.ob.Login(ctx, s)
	if err != nil {
		return err
	}
	r.announceSession(ns)
	r.markDirty(true)
	r.Kick("login")
	return nil
}

// Logout ends the queue's session in every tab and announces it; with
// purge the user's records are deleted. A flush in progress, in any tab,
// stops before sending another record of that user.
func (r *Runtime) Logout(ctx context.Context, purge bool) (int, error) {
	n, err := r.ob.Logout(ctx, purge)
	r.announceSession(r.ob.QueueSession())
	r.markDirty(true)
	return n, err
}

// Enqueue records op durably (it returns after the commit), then announces
// OUTBOX_CHANGED to the other tabs and triggers a flush here.
func (r *Runtime) Enqueue(ctx context.Context, op Op) (EnqueueResult, error) {
	if r.closed.Load() {
		return EnqueueResult{}, ErrRuntimeClosed
	}
	res, err := r.ob.Enqueue(ctx, op)
	if err != nil {
		return res, err
	}
	r.announceLater()
	return res, nil
}

// announceLater schedules the OUTBOX_CHANGED announcement and flush hint of
// a committed enqueue (see later).
func (r *Runtime) announceLater() {
	r.laterMu.Lock()
	r.announce = true
	r.laterMu.Unlock()
	r.later()
}

// OnAppendChange registers fn, called synchronously whenever the loader's
// target of plain appends may have changed (see UseLoader): after Login
// and Logout and on Close. One function; a later call replaces it.
func (r *Runtime) OnAppendChange(fn func()) { r.appendHook.set(fn) }

// announceEvery bounds how often a tab posts OUTBOX_CHANGED: a
// BroadcastChannel post costs the poster more than the rest of an enqueue's
// work on the page (measured: 0.3-0.9 ms, against microseconds for a
// MessagePort), and a burst of enqueues needs one flush hint, not one per
// record.
const announceEvery = 50 * time.Millisecond

// announceChanged posts OUTBOX_CHANGED now if none was posted in the last
// announceEvery, else makes sure one is posted when that interval ends
// (leading and trailing edge): every committed enqueue is followed by an
// announcement posted after its commit; a lone one at once.
func (r *Runtime) announceChanged() {
	now := time.Now()
	r.laterMu.Lock()
	if wait := r.announcedAt.Add(announceEvery).Sub(now); wait > 0 {
		if r.announceT == nil {
			r.announceT = time.AfterFunc(wait, func() {
				r.laterMu.Lock()
				r.announceT = nil
				r.announcedAt = time.Now()
				r.laterMu.Unlock()
				r.post(KindOutboxChanged, js.Undefined())
			})
		}
		r.laterMu.Unlock()
		return
	}
	r.announcedAt = now
	r.laterMu.Unlock()
	r.post(KindOutboxChanged, js.Undefined())
}

// installLater sets up the task source of later: a MessageChannel, whose
// messages are tasks that run as soon as the event loop is free (unlike
// setTimeout, not clamped, nor throttled in hidden tabs).
func (r *Runtime) installLater() {
	mc, err := jsglue.Try(func() js.Value { return js.Global().Get("MessageChannel").New() })
	if err != nil || mc.Type() != js.TypeObject {
		return // no MessageChannel: later runs its work at once
	}
	cb := jsglue.NewCallback(func(js.Value, []js.Value) any {
		r.runLater()
		return nil
	})
	p1 := mc.Get("port1")
	p1.Set("onmessage", cb.Value) // starts the port
	r.laterPort = mc.Get("port2")
	r.laterStop = func() {
		p1.Set("onmessage", js.Null())
		p1.Call("close")
		r.laterPort.Call("close")
		cb.Release()
	}
	r.listeners = append(r.listeners, r.laterStop)
}

// later schedules the work an enqueue leaves after its commit — the
// OUTBOX_CHANGED announcement (once for every enqueue committed before the
// task runs, so always after their commits), this tab's flush hint, the
// delivery of its event (of every event: see onEvent) and the status
// refresh — in the next task rather than before the enqueue's
// promise settles: the caller's next enqueue is issued first and that work
// runs while IndexedDB commits it. A burst of enqueues announces once per
// task instead of once per record; the hints are coalescing anyway.
func (r *Runtime) later() {
	r.laterMu.Lock()
	if r.laterPending {
		r.laterMu.Unlock()
		return
	}
	r.laterPending = true
	port := r.laterPort
	r.laterMu.Unlock()
	if port.Type() != js.TypeObject {
		r.runLater()
		return
	}
	if _, err := jsglue.Call(port, "postMessage", js.Null()); err != nil {
		r.runLater()
	}
}

// runLater does the scheduled work (in the task, or at once without a
// task source).
func (r *Runtime) runLater() {
	r.laterMu.Lock()
	r.laterPending = false
	announce := r.announce
	r.announce = false
	evs := r.laterEvents
	r.laterEvents = nil
	r.laterMu.Unlock()
	dirty := announce
	for _, e := range evs {
		select {
		case r.evCh <- e:
		default: // a subscriber that cannot keep up loses events, never the queue
		}
		if e.Kind != EventSkipLocked {
			dirty = true
		}
	}
	if announce {
		r.announceChanged()
	}
	if dirty {
		r.markDirty(true)
	}
	if announce {
		r.Kick("enqueue")
	}
}

// Kick is a flush hint (non-blocking; hints coalesce, the lock dedupes).
func (r *Runtime) Kick(reason string) {
	select {
	case r.kickCh <- reason:
	default:
	}
}

// Flush tries to flush now: it takes the flush lock if it is free and
// drains the due records of the current user. If another tab holds the lock
// it returns at once (that tab flushes; skipped reports it).
func (r *Runtime) Flush(ctx context.Context) (rep FlushReport, skipped bool, err error) {
	if r.closed.Load() {
		return rep, false, ErrRuntimeClosed
	}
	return r.attempt(ctx, "manual", false)
}

// Status re-reads the shared projection.
func (r *Runtime) Status(ctx context.Context) (RuntimeStatus, error) {
	return r.readStatus(ctx)
}

// DeadLetters lists dead letters, conflicts and terminal failures.
func (r *Runtime) DeadLetters(ctx context.Context) ([]Record, error) { return r.ob.DeadLetters(ctx) }

// Retry puts a dead letter (conflict, terminal) back in the queue.
func (r *Runtime) Retry(ctx context.Context, id string) error {
	err := r.ob.Retry(ctx, id)
	if err == nil {
		r.post(KindOutboxChanged, js.Undefined())
		r.markDirty(true)
		r.Kick("retry")
	}
	return err
}

// Discard deletes a dead letter (conflict, terminal) the app resolved.
func (r *Runtime) Discard(ctx context.Context, id string) error {
	err := r.ob.Discard(ctx, id)
	if err == nil {
		r.markDirty(true)
	}
	return err
}

// Pause stops flushing in every tab until Resume.
func (r *Runtime) Pause(ctx context.Context) error {
	err := r.ob.Pause(ctx)
	if err == nil {
		r.mu.Lock()
		r.last.Paused = true
		r.mu.Unlock()
	}
	r.markDirty(true)
	return err
}

// Resume lifts the pause (and the current user's auth pause) and flushes.
func (r *Runtime) Resume(ctx context.Context) error {
	err := r.ob.Resume(ctx)
	if err == nil {
		r.mu.Lock()
		r.last.Paused = false
		r.mu.Unlock()
		r.post(KindOutboxChanged, js.Undefined())
		r.Kick("resume")
	}
	r.markDirty(true)
	return err
}

// OnStatus subscribes fn to status pushes (called on its own goroutine,
// in order). It returns the unsubscribe function.
func (r *Runtime) OnStatus(fn func(RuntimeStatus)) func() {
	r.mu.Lock()
	r.subsN++
	id := r.subsN
	r.statusSubs[id] = fn
	r.mu.Unlock()
	return func() { r.mu.Lock(); delete(r.statusSubs, id); r.mu.Unlock() }
}

// OnEvent subscribes fn to the structured events (never with a payload).
func (r *Runtime) OnEvent(fn func(Event)) func() {
	r.mu.Lock()
	r.subsN++
	id := r.subsN
	r.eventSubs[id] = fn
	r.mu.Unlock()
	return func() { r.mu.Lock(); delete(r.eventSubs, id); r.mu.Unlock() }
}

// LastStatus returns the last status pushed (no IndexedDB read).
func (r *Runtime) LastStatus() RuntimeStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// ---- triggers ----

func (r *Runtime) installTriggers() {
	add := func(target js.Value, event, reason string, cond func() bool) {
		if target.Type() != js.TypeObject || target.Get("addEventListener").Type() != js.TypeFunction {
			return
		}
		cb := jsglue.NewCallback(func(js.Value, []js.Value) any {
			if cond == nil || cond() {
				r.Kick(reason)
			}
			return nil
		})
		target.Call("addEventListener", event, cb.Value)
		r.listeners = append(r.listeners, func() {
			target.Call("removeEventListener", event, cb.Value)
			cb.Release()
		})
	}
	g := js.Global()
	add(g, "online", "online", func() bool {
		r.ob.Reconnected() // network backoffs end: the queue drains now
		r.mu.Lock()
		r.fenceRetryAt = time.Time{} // try at once
		r.mu.Unlock()
		return true
	})
	add(g, "focus", "focus", nil)
	doc := g.Get("document")
	// Page Lifecycle: a frozen page runs no timers and gets no IndexedDB
	// events, yet channel messages still reach it and wake its goroutines.
	// A transaction it holds or starts then never ends and blocks the
	// queue's database for every tab. So on freeze: abort the open
	// flush-path transactions and start no IndexedDB work until resume.
	add(doc, "freeze", "freeze", func() bool {
		r.frozen.Store(true) // the transactions: idb's freeze tracker aborts them
		return false
	})
	add(doc, "resume", "resume", func() bool {
		r.frozen.Store(false)
		go r.syncSession() // a session announced while frozen
		r.markDirty(false)
		return true
	})
	add(doc, "visibilitychange", "visible", func() bool {
		v, err := jsglue.Get(doc, "visibilityState")
		return err == nil && v.Type() == js.TypeString && v.String() == "visible"
	})
}

// ---- channel ----

func (r *Runtime) post(kind string, payload js.Value) {
	if r.closed.Load() {
		return
	}
	_, _ = r.ch.Send(r.seq, kind, payload)
}

func (r *Runtime) onMessage(m channel.Message) {
	if m.Owner == r.id {
		return
	}
	switch m.Kind {
	case KindOutboxChanged:
		r.Kick("broadcast")
	case KindStatusChanged:
		r.markDirty(false)
	case KindSessionChanged:
		r.onSessionAnnounced(m.Payload)
	case kindStolen:
		// Another tab stole the flush lock from a frozen or hung owner.
		// If that is this tab (frozen: channel messages still arrive, its
		// IndexedDB events do not), its open transactions would block
		// the queue's database for every tab: abort them now, from this
		// message's task. The thief's lease token fences the rest.
		// The message names the owner the thief saw: another tab
		// stealing at the same moment is not the victim, and goes on
		// (the Web Lock tells the one of the two that lost).
		target := ""
		if m.Payload.Type() == js.TypeString {
			target = m.Payload.String()
		}
		r.mu.Lock()
		busy := r.busy
		r.mu.Unlock()
		if busy && (target == "" || target == r.id || r.frozen.Load()) {
			r.abortTxns()
		}
	case KindStatusAsk:
		r.mu.Lock()
		owning, lease := r.owning, r.lease
		stalled := time.Duration(0)
		if r.flushing && !r.lastStep.IsZero() {
			stalled = time.Since(r.lastStep)
		}
		r.mu.Unlock()
		if !owning || r.mute.Load() {
			return
		}
		// Answer from a timer task, not from this message's task: a
		// frozen tab still receives channel messages but runs no timers,
		// so it stays silent and its lock is stolen.
		var cb *jsglue.Callback
		cb = jsglue.NewCallback(func(js.Value, []js.Value) any {
			cb.Release()
			if r.mute.Load() {
				return nil
			}
			r.post(KindStatusAnswer, r.answerPayload(lease, stalled))
			return nil
		})
		js.Global().Call("setTimeout", cb.Value, 0)
	case KindStatusAnswer:
		p := m.Payload
		var fence uint64
		var stalled time.Duration
		if p.Type() == js.TypeObject {
			if v, err := jsglue.Get(p, "fence"); err == nil && v.Type() == js.TypeNumber {
				fence = uint64(v.Float())
			}
			if v, err := jsglue.Get(p, "stalledMs"); err == nil && v.Type() == js.TypeNumber {
				stalled = time.Duration(v.Float()) * time.Millisecond
			}
		}
		r.mu.Lock()
		r.remoteOwner, r.remoteFence = m.Owner, fence
		act := r.wd.Answer(time.Now(), stalled)
		r.mu.Unlock()
		if act == WatchSteal {
			r.requestSteal()
		}
		r.markDirty(false)
	}
}

func (r *Runtime) answerPayload(l Lease, stalled time.Duration) js.Value {
	o := js.Global().Get("Object").New()
	o.Set("token", float64(l.Token))
	o.Set("fence", float64(l.FenceToken))
	o.Set("stalledMs", float64(stalled/time.Millisecond))
	return o
}

func (r *Runtime) requestSteal() {
	select {
	case r.stealCh <- struct{}{}:
	default:
	}
}

// ---- events and status ----

func (r *Runtime) onEvent(e Event) {
	r.mu.Lock()
	if r.owning {
		r.lastStep = time.Now()
	}
	r.mu.Unlock()
	// Delivery and the status refresh happen in the next task (later):
	// an enqueue's event then reaches the subscribers after its promise
	// settled, and no goroutine wakes on its path.
	r.laterMu.Lock()
	if len(r.laterEvents) < cap(r.evCh) {
		r.laterEvents = append(r.laterEvents, e)
	} // else a subscriber that cannot keep up loses events, never the queue
	r.laterMu.Unlock()
	r.later()
}

func (r *Runtime) eventLoop() {
	for {
		var e Event
		select {
		case <-r.ctx.Done():
			return
		case e = <-r.evCh:
		}
		r.mu.Lock()
		subs := make([]func(Event), 0, len(r.eventSubs))
		for _, fn := range r.eventSubs {
			subs = append(subs, fn)
		}
		r.mu.Unlock()
		for {
			for _, fn := range subs {
				safeCall(func() { fn(e) })
			}
			select {
			case e = <-r.evCh:
				continue
			default:
			}
			break
		}
	}
}

func safeCall(fn func()) {
	defer func() { _ = recover() }()
	fn()
}

// markDirty asks for a status refresh; local changes are also announced
// (STATUS_CHANGED) so every tab re-reads the projection.
func (r *Runtime) markDirty(local bool) {
	r.mu.Lock()
	if local {
		r.dirtyLocal = true
	} else {
		r.dirtyRemote = true
	}
	r.mu.Unlock()
	select {
	case r.dirtyCh <- struct{}{}:
	default:
	}
}

func (r *Runtime) readStatus(ctx context.Context) (RuntimeStatus, error) {
	p, err := r.ob.Status(ctx)
	if err != nil {
		return RuntimeStatus{}, err
	}
	l, found, err := r.store.GetLease(ctx, r.ob.LockName())
	if err != nil {
		return RuntimeStatus{}, err
	}
	r.mu.Lock()
	st := RuntimeStatus{Projection: p, Owner: r.owning, Flushing: r.flushing, ID: r.id}
	switch {
	case r.owning:
		st.OwnerID, st.LeaseToken, st.FenceToken = r.id, r.lease.Token, r.lease.FenceToken
	case found:
		st.OwnerID, st.LeaseToken = l.Owner, l.Token
		if l.Owner == r.remoteOwner {
			st.FenceToken = r.remoteFence
		}
	}
	r.mu.Unlock()
	return st, nil
}

func (r *Runtime) statusLoop() {
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.dirtyCh:
		}
		// Every read scans the queue: keep reads to a fraction of the
		// time (at least 10x the last read's cost apart), and while this
		// tab flushes, fewer and larger steps still (waiting tabs see
		// progress well within the watchdog's stall time).
		d := r.cfg.StatusDebounce
		r.mu.Lock()
		if c := 10 * r.readCost; c > d {
			d = min(c, 2*time.Second)
		}
		if r.flushing {
			d *= 3
		}
		r.mu.Unlock()
		time.Sleep(d)
		if r.frozen.Load() {
			// No IndexedDB work while frozen; resume marks dirty again.
			continue
		}
		r.mu.Lock()
		local := r.dirtyLocal
		r.dirtyLocal, r.dirtyRemote = false, false
		r.mu.Unlock()
		if local {
			r.post(KindStatusChanged, js.Undefined())
		}
		began := time.Now()
		r.mu.Lock()
		r.readingSince = began
		r.mu.Unlock()
		select {
		case r.wdWake <- struct{}{}:
		default:
		}
		st, err := r.readStatus(r.ctx)
		r.mu.Lock()
		r.readingSince = time.Time{}
		r.mu.Unlock()
		if err != nil {
			continue
		}
		r.mu.Lock()
		r.readCost = time.Since(began)
		resumed := r.last.Paused && !st.Paused
		r.last = st
		due := HasDueWork(st.Projection) && r.contended
		act := r.wd.Observe(time.Now(), ProgressMark(st.Projection), st.LastAckAt, st.OldestPendingAt, due, r.owning)
		subs := make([]func(RuntimeStatus), 0, len(r.statusSubs))
		for _, fn := range r.statusSubs {
			subs = append(subs, fn)
		}
		r.mu.Unlock()
		if resumed {
			// Attempts were skipped while paused (see attempt).
			r.Kick("resumed")
		}
		r.watchAct(act)
		select {
		case r.wdWake <- struct{}{}:
		default:
		}
		for _, fn := range subs {
			safeCall(func() { fn(st) })
		}
	}
}

// watchLoop runs the watchdog's timers. It never waits on IndexedDB: a
// frozen owner may hold a transaction open that blocks every read of the
// queue, and that is exactly when the watchdog must still act.
func (r *Runtime) watchLoop() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		r.mu.Lock()
		wake := r.wd.NextWake()
		blocked := !r.readingSince.IsZero() && r.contended && !r.owning
		if blocked && !r.wd.Armed() {
			// A status read is outstanding while another tab holds the
			// lock: if it is still blocked after StallAfter, suspect.
			if w := r.readingSince.Add(r.wd.Config().StallAfter); wake.IsZero() || w.Before(wake) {
				wake = w
			}
		}
		r.mu.Unlock()
		if wake.IsZero() {
			t.Stop()
		} else {
			d := time.Until(wake)
			if d < 0 {
				d = 0
			}
			t.Reset(d)
		}
		select {
		case <-r.ctx.Done():
			return
		case <-r.wdWake:
			continue
		case <-t.C:
		}
		r.mu.Lock()
		now := time.Now()
		var act WatchAction
		if since := r.readingSince; !since.IsZero() && r.contended && !r.owning && now.Sub(since) >= r.wd.Config().StallAfter {
			act = r.wd.Suspect(now, since)
		} else {
			act = r.wd.Tick(now)
		}
		r.mu.Unlock()
		r.watchAct(act)
	}
}

func (r *Runtime) watchAct(act WatchAction) {
	switch act {
	case WatchAsk:
		r.post(KindStatusAsk, js.Undefined())
	case WatchSteal:
		r.requestSteal()
	}
}

// abortTxns aborts this runtime's open transactions of the flush path (the
// ones over the lease or the metadata store, and every readonly one): what
// the page's freeze event aborts too (idb's freeze tracker, see
// OpenIDBStore).
func (r *Runtime) abortTxns() {
	if st, ok := r.store.(*IDBStore); ok {
		idb.AbortOpen(st.db)
	}
}

// ---- flushing ----

func (r *Runtime) flushLoop() {
	for {
		select {
		case <-r.ctx.Done():
			return
		case reason := <-r.kickCh:
			_, _, _ = r.attempt(r.ctx, reason, false)
		case <-r.stealCh:
			if _, _, err := r.attempt(r.ctx, "steal", true); err != nil {
				// Two tabs that steal at once can both come away without
				// the queue: the Web Lock goes to the later thief, the
				// lease to the slower one, which fences the other. Try
				// again at once, without stealing: whoever finds the lock
				// free flushes.
				r.Kick("steal")
			}
		case <-r.dueT.C:
			_, _, _ = r.attempt(r.ctx, "timer", false)
		}
	}
}

// attempt takes ownership (the Web Lock with ifAvailable, or with steal from
// a frozen owner; the IndexedDB lease without Web Locks) and flushes.
func (r *Runtime) attempt(ctx context.Context, reason string, steal bool) (rep FlushReport, skipped bool, err error) {
	// One attempt at a time in this runtime: a manual Flush waits for the
	// background one instead of finding its own lock taken.
	r.attemptMu.Lock()
	defer r.attemptMu.Unlock()
	if r.frozen.Load() {
		return rep, false, ErrPaused // resume kicks a flush
	}
	if r.ob.QueueSession().UserID == "" {
		return rep, false, ErrNoSession
	}
	r.mu.Lock()
	wait := time.Until(r.fenceRetryAt)
	paused := r.last.Paused
	r.mu.Unlock()
	if paused && !steal && reason != "manual" {
		// Paused (as last read, or set here): Resume in any tab announces
		// OUTBOX_CHANGED, which flushes. No lock, no fence request meanwhile.
		return rep, false, ErrPaused
	}
	if wait > 0 && !steal && reason != "manual" && reason != "online" {
		// The server could not be reached for a fencing token: wait
		// for the retry timer (or the online event) instead of hammering.
		return rep, false, ErrFenceUnavailable
	}
	run := func(lctx context.Context, webLock bool) error {
		rep, skipped, err = r.ownAndFlush(lctx, reason, webLock, steal)
		return nil
	}
	if !r.cfg.NoWebLocks {
		lerr := locks.Request(ctx, r.lockName, locks.Options{IfAvailable: !steal, Steal: steal}, func(lctx context.Context) error {
			return run(lctx, true)
		})
		switch {
		case errors.Is(lerr, locks.ErrNotAcquired):
			r.skip(reason)
			return rep, true, nil
		case errors.Is(lerr, locks.ErrUnavailable):
			// fall through to the IndexedDB lease
		case errors.Is(lerr, locks.ErrStolen):
			return rep, false, ErrStaleOwner
		case lerr != nil:
			return rep, false, lerr
		default:
			return rep, skipped, err
		}
	}
	_ = run(ctx, false)
	return rep, skipped, err
}

func (r *Runtime) skip(reason string) {
	r.mu.Lock()
	r.contended = true
	r.mu.Unlock()
	r.ob.SkippedLocked(r.id, reason)
	r.markDirty(false)
}

func (r *Runtime) ownAndFlush(ctx context.Context, reason string, webLock, steal bool) (rep FlushReport, skipped bool, err error) {
	r.mu.Lock()
	r.busy = true
	victim := r.last.OwnerID
	if victim == "" {
		victim = r.remoteOwner
	}
	r.mu.Unlock()
	if steal {
		// Before any IndexedDB request: a frozen owner may hold a
		// transaction open that would block ours until it aborts it.
		r.post(kindStolen, js.ValueOf(victim))
	}
	defer func() {
		r.mu.Lock()
		r.busy = false
		r.mu.Unlock()
	}()
	lease, err := r.ob.Acquire(ctx, r.id, webLock || steal)
	if errors.Is(err, ErrLeaseHeld) {
		r.skip(reason)
		return rep, true, nil
	}
	if err != nil {
		return rep, false, err
	}
	r.mu.Lock()
	r.contended = false
	r.mu.Unlock()
	// The queue's session as stored, not as last heard: the fence and the
	// flush are for its user (Flush checks it again before every claim).
	if _, err := r.ob.SyncSession(ctx); err != nil {
		_ = r.ob.Release(context.WithoutCancel(ctx), lease)
		return rep, false, err
	}
	user := r.ob.QueueSession().UserID
	res := fenceResource(r.cfg.Name, r.cfg.Protocol, user)
	tok, ferr, err := r.fence(ctx, res, user)
	if err != nil {
		r.fenceFailed(ctx, lease, ferr, err)
		return rep, false, err
	}
	lease.Resource, lease.FenceToken = res, tok
	r.mu.Lock()
	failing := r.last.Failure.Failing()
	r.mu.Unlock()
	if failing {
		// The server answered: a failure spell the status shows is over
		// even if there is nothing to send (the flush below tells more).
		_ = r.ob.NoteReached(ctx)
	}
	r.mu.Lock()
	r.fenceFails, r.fenceRetryAt = 0, time.Time{}
	r.owning, r.flushing, r.lease, r.lastStep = true, true, lease, time.Now()
	r.mu.Unlock()
	// Announce the takeover: waiting tabs stop their status timers.
	r.post(KindStatusAnswer, r.answerPayload(lease, 0))
	r.markDirty(true)
	defer func() {
		r.mu.Lock()
		r.owning, r.flushing = false, false
		r.mu.Unlock()
		r.markDirty(true)
	}()
	stopRenew := func() {}
	if !webLock {
		rctx, cancel := context.WithCancel(ctx)
		stopRenew = cancel
		go r.renew(rctx, lease)
	}
	for {
		var one FlushReport
		one, err = r.ob.Flush(ctx, lease)
		rep.Batches += one.Batches
		rep.Claimed += one.Claimed
		rep.Acked += one.Acked
		rep.Retried += one.Retried
		rep.DeadLettered += one.DeadLettered
		rep.Terminal += one.Terminal
		rep.Conflicts += one.Conflicts
		rep.Released += one.Released
		rep.More = one.More
		if err != nil || ctx.Err() != nil || one.Claimed == 0 {
			break
		}
		// More work arrived while flushing (hints coalesced in kickCh)?
		select {
		case <-r.kickCh:
			continue
		default:
		}
		break
	}
	stopRenew()
	stale := errors.Is(err, ErrStaleOwner) || errors.Is(err, ErrStepDown) || ctx.Err() != nil
	if !stale {
		_ = r.ob.Release(context.WithoutCancel(ctx), lease)
	}
	switch {
	case errors.Is(err, ErrStepDown), errors.Is(err, ErrSessionChanged):
		// Ownership ended; the next flush re-acquires with a new token.
		r.dueT.Reset(100 * time.Millisecond)
	case stale, errors.Is(err, ErrPaused), errors.Is(err, ErrAuthRequired), errors.Is(err, ErrSessionMismatch):
		// Resume (in any tab) announces OUTBOX_CHANGED and flushes.
	case errors.Is(err, ErrOffline):
		// No timer: the online event (in every tab) flushes.
	case rep.More:
		// Stopped at the deadline with work left: go on at once (another
		// tab may take over meanwhile: the lock decides), without reading
		// every waiting record for a due time that is now.
		r.dueT.Reset(time.Millisecond)
		r.compact(ctx)
	default:
		r.scheduleNext(user)
		r.compact(ctx)
	}
	return rep, false, err
}

// compact deletes old acked records, at most once a minute, as the owner.
func (r *Runtime) compact(ctx context.Context) {
	r.mu.Lock()
	due := time.Since(r.compactedAt) >= time.Minute
	if due {
		r.compactedAt = time.Now()
	}
	r.mu.Unlock()
	if due {
		if n, err := r.ob.Compact(context.WithoutCancel(ctx), r.cfg.AckedRetention); err == nil && n > 0 {
			r.markDirty(true)
		}
	}
}

// renew keeps the fallback lease alive during a long flush.
func (r *Runtime) renew(ctx context.Context, l Lease) {
	every := r.ob.cfg.LeaseTTL / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := r.store.UpdateLease(ctx, r.ob.LockName(), RenewLease(l, time.Now(), r.ob.cfg.LeaseTTL)); err != nil {
				return
			}
		}
	}
}

// scheduleNext arms the timer for the next due record of user.
func (r *Runtime) scheduleNext(user string) {
	recs, err := r.store.List(r.ctx, Filter{UserID: user, Statuses: []Status{StatusPending, StatusFailed}})
	if err != nil {
		return
	}
	next := NextDue(recs)
	if next.IsZero() {
		return
	}
	d := time.Until(next)
	if d < 0 {
		d = 0
	}
	r.dueT.Reset(d + time.Millisecond)
}

// fence obtains a server fencing token for resource (POST FencePath+resource).
// A failure comes with its ErrorInfo (FenceError).
func (r *Runtime) fence(ctx context.Context, resource, user string) (uint64, ErrorInfo, error) {
	resp, err := r.transport.Send(ctx, Request{Method: "POST", Endpoint: r.cfg.FencePath + resource, Header: Header{}, UserID: user})
	if err != nil {
		return 0, FenceError(0, err, errors.Is(err, ErrOffline)), errors.Join(ErrFenceUnavailable, err)
	}
	if resp.Status != 200 {
		return 0, FenceError(resp.Status, nil, false), errors.Join(ErrFenceUnavailable, errors.New("outbox: fence answered "+strconv.Itoa(resp.Status)))
	}
	tok, ok := ParseFenceToken(resp.Body)
	if !ok {
		return 0, FenceError(resp.Status, nil, false), errors.Join(ErrFenceUnavailable, errors.New("outbox: fence answer without a token"))
	}
	return tok, ErrorInfo{}, nil
}

// fenceFailed gives the lease back after a failed fencing token request,
// arms the retry timer (backoff, at most 30 s) and records the failure in
// the queue's metadata for every tab's status (still holding the lock: only
// the would-be owner writes it).
func (r *Runtime) fenceFailed(ctx context.Context, lease Lease, e ErrorInfo, err error) {
	r.mu.Lock()
	r.fenceFails++
	d := r.ob.cfg.Backoff.Ceiling(r.fenceFails)
	if d > 30*time.Second {
		d = 30 * time.Second
	}
	r.fenceRetryAt = time.Now().Add(d)
	next := r.fenceRetryAt
	r.mu.Unlock()
	wctx := context.WithoutCancel(ctx)
	_ = r.ob.Release(wctx, lease)
	if r.ob.NoteFenceFailure(wctx, e, next) == nil {
		r.markDirty(true)
	}
	r.dueT.Reset(d)
	r.ob.emit(Event{Kind: EventFlushEnd, At: time.Now(), Owner: r.id, LeaseToken: lease.Token, Reason: short("fence: " + err.Error())})
}
