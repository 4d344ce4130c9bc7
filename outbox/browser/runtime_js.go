//go:build js && wasm

package browser

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/channel"
	"github.com/tabfence/tabfence/internal/deadline"
	"github.com/tabfence/tabfence/internal/randid"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/fetch"
	"github.com/tabfence/tabfence/outbox/idbstore"
	"github.com/tabfence/tabfence/outbox/queue"
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
	Outbox outbox.Config
	// BaseURL prefixes endpoint paths (default: the page's origin).
	BaseURL string
	// FencePath is where server fencing tokens are issued: the flush owner
	// POSTs FencePath+resource on taking over (default "/fence/").
	FencePath string
	// Authorize adds credentials to every request at send time (the
	// records and the fence requests), for req.UserID. Nothing it adds is
	// ever stored.
	Authorize func(ctx context.Context, req outbox.Request, h outbox.Header) error
	// SendTimeout bounds one request (default 30 s): a hung request
	// becomes a retryable network error.
	SendTimeout time.Duration
	// Watch tunes frozen-owner detection (default: ask after 1 s without
	// progress, steal after 1.5 s without an answer).
	Watch WatchConfig
	// Session logs in at once when UserID is set.
	Session outbox.Session
	// NoWebLocks forces the IndexedDB lease fallback (as without
	// navigator.locks).
	NoWebLocks bool
	// StatusDebounce coalesces status refreshes (default 100 ms).
	StatusDebounce time.Duration
	// Store, when set, is used instead of opening Names(Name, Protocol).Database.
	Store outbox.Store
	// AckedRetention is how long acked records stay before the flush owner
	// compacts them (Outbox.Compact, at most once a minute); default
	// DefaultAckedRetention.
	AckedRetention time.Duration
	// Passive: the runtime flushes only when Drain is called (a Service
	// Worker's sync event). No flush at start, on page events, on other
	// tabs' OUTBOX_CHANGED, on the due timer, and no watchdog asks or
	// steals; it still answers status questions while it owns, pushes
	// status and events, and honours steals.
	Passive bool
	// NoBackgroundSync: a page does not register the Background Sync tag
	// (SyncTag) after enqueues and at open.
	NoBackgroundSync bool
}

// RuntimeStatus is what every tab renders: the shared projection read from
// the Store, plus who flushes.
type RuntimeStatus struct {
	outbox.Projection
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
	ob        *outbox.Outbox
	store     outbox.Store
	ownStore  bool
	transport outbox.Transport
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
	evCh    chan outbox.Event

	lt         later                  // work an enqueue leaves to the next task (later_js.go)
	bs         bgSync                 // the page's sync tag registrations (bgsync_js.go)
	appendHook atomic.Pointer[func()] // OnAppendChange

	attemptSem   chan struct{} // one attempt (flush or drain) at a time: lockAttempt
	mu           sync.Mutex
	owning       bool
	flushing     bool
	busy         bool      // inside ownAndFlush (taking ownership or flushing)
	grantAt      time.Time // when ownAndFlush was granted the Web Lock (zero outside it)
	lease        queue.Lease
	lastStep     time.Time // owner: last time a step of its flush finished
	contended    bool      // our last attempt found the lock held
	dirtyLocal   bool
	dirtyRemote  bool
	wd           *watchdog
	last         RuntimeStatus
	remoteFence  uint64
	remoteOwner  string
	fenceRetryAt time.Time
	fenceFails   int
	compactedAt  time.Time
	readCost     time.Duration // of the last status read
	readingSince time.Time     // a status read is outstanding since
	subs         subscribers   // guarded by mu

	listeners []func()
	unsub     func()
	closed    atomic.Bool

	// mute (tests): ignore status questions, as a frozen tab does.
	mute atomic.Bool
	// frozen: between the page's freeze and resume events.
	frozen atomic.Bool
}

// subscribers are the OnStatus and OnEvent functions, by subscription id.
type subscribers struct {
	n      int
	status map[int]func(RuntimeStatus)
	events map[int]func(outbox.Event)
}

// kindStolen announces a steal of the flush lock (before the thief touches
// IndexedDB).
const kindStolen = "stolen!"

// OpenRuntime opens the queue's store and channel, installs the triggers and
// starts flushing when the queue has due work.
func OpenRuntime(ctx context.Context, cfg RuntimeConfig) (*Runtime, error) {
	if cfg.Name == "" {
		return nil, queue.ErrInvalidRecord
	}
	cfg = cfg.withDefaults()
	names, err := queue.Names(cfg.Name, cfg.Protocol)
	if err != nil {
		return nil, err
	}
	lockName := names.Lock
	r := &Runtime{
		cfg: cfg, id: randid.New(), lockName: lockName,
		kickCh: make(chan string, 1), stealCh: make(chan struct{}, 1), dirtyCh: make(chan struct{}, 1),
		wdWake: make(chan struct{}, 1), attemptSem: make(chan struct{}, 1),
		evCh: make(chan outbox.Event, 4096), wd: newWatchdog(cfg.Watch),
		subs: subscribers{status: map[int]func(RuntimeStatus){}, events: map[int]func(outbox.Event){}},
	}
	r.store = cfg.Store
	if r.store == nil {
		st, err := idbstore.Open(ctx, names.Database)
		if err != nil {
			return nil, err
		}
		r.store, r.ownStore = st, true
	}
	if r.ob, err = outbox.New(r.outboxConfig()); err != nil {
		r.closeStore()
		return nil, err
	}
	r.ob.OnSessionChange(r.appendChanged)
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
	go r.statusLoop()
	go r.eventLoop()
	r.markDirty(false)
	if !cfg.Passive {
		r.installTriggers()
		go r.flushLoop()
		go r.watchLoop()
		r.Kick("start")
		go r.registerSyncIfQueued()
	}
	return r, nil
}

func (c RuntimeConfig) withDefaults() RuntimeConfig {
	if c.Protocol <= 0 {
		c.Protocol = 1
	}
	if c.FencePath == "" {
		c.FencePath = "/fence/"
	}
	if c.SendTimeout <= 0 {
		c.SendTimeout = 30 * time.Second
	}
	if c.StatusDebounce <= 0 {
		c.StatusDebounce = 100 * time.Millisecond
	}
	return c
}

// outboxConfig is the Outbox's configuration: the app's, on the runtime's
// store and fetch transport (bounded by SendTimeout) unless it names its
// own, with every event also delivered to the runtime (onEvent).
func (r *Runtime) outboxConfig() outbox.Config {
	cfg := r.cfg
	ft := &fetch.Transport{BaseURL: cfg.BaseURL, Authorize: cfg.Authorize}
	r.transport = outbox.TransportFunc(func(ctx context.Context, req outbox.Request) (outbox.Response, error) {
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
	oc.Events = outbox.EventsFunc(func(e outbox.Event) {
		if user != nil {
			user.Emit(e)
		}
		r.onEvent(e)
	})
	return oc
}

func (r *Runtime) closeStore() {
	if c, ok := r.store.(interface{ Close() error }); ok && r.ownStore {
		_ = c.Close()
	}
}

// ID is this runtime's owner id (lease owner, channel sender).
func (r *Runtime) ID() string { return r.id }

// Outbox returns the underlying queue.
func (r *Runtime) Outbox() *outbox.Outbox { return r.ob }

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
	r.appendChanged()
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
func (r *Runtime) Login(ctx context.Context, s outbox.Session) error {
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
func (r *Runtime) Enqueue(ctx context.Context, op outbox.Op) (queue.EnqueueResult, error) {
	if r.closed.Load() {
		return queue.EnqueueResult{}, ErrRuntimeClosed
	}
	res, err := r.ob.Enqueue(ctx, op)
	if err != nil {
		return res, err
	}
	r.announceLater()
	return res, nil
}

// Kick is a flush hint (non-blocking; hints coalesce, the lock dedupes).
// A passive runtime flushes on Drain only: it has no flush loop, so its
// hint is read only by a drain's flush (flushOwned), which then picks up a
// page's enqueue announced while the worker owns.
func (r *Runtime) Kick(reason string) {
	select {
	case r.kickCh <- reason:
	default:
	}
}

// Flush tries to flush now: it takes the flush lock if it is free and
// drains the due records of the current user. If another tab holds the lock
// it returns at once (that tab flushes; skipped reports it).
func (r *Runtime) Flush(ctx context.Context) (rep outbox.FlushReport, skipped bool, err error) {
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
func (r *Runtime) DeadLetters(ctx context.Context) ([]queue.Record, error) {
	return r.ob.DeadLetters(ctx)
}

// Retry puts a dead letter (conflict, terminal) back in the queue.
func (r *Runtime) Retry(ctx context.Context, id string) error {
	err := r.ob.Retry(ctx, id)
	if err == nil {
		r.post(kindOutboxChanged, js.Undefined())
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
		r.post(kindOutboxChanged, js.Undefined())
		r.Kick("resume")
	}
	r.markDirty(true)
	return err
}

// OnStatus subscribes fn to status pushes (called on its own goroutine,
// in order). It returns the unsubscribe function.
func (r *Runtime) OnStatus(fn func(RuntimeStatus)) func() {
	r.mu.Lock()
	r.subs.n++
	id := r.subs.n
	r.subs.status[id] = fn
	r.mu.Unlock()
	return func() { r.mu.Lock(); delete(r.subs.status, id); r.mu.Unlock() }
}

// OnEvent subscribes fn to the structured events (never with a payload).
func (r *Runtime) OnEvent(fn func(outbox.Event)) func() {
	r.mu.Lock()
	r.subs.n++
	id := r.subs.n
	r.subs.events[id] = fn
	r.mu.Unlock()
	return func() { r.mu.Lock(); delete(r.subs.events, id); r.mu.Unlock() }
}

// lastStatus returns the last status pushed (no IndexedDB read).
func (r *Runtime) lastStatus() RuntimeStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// ---- triggers ----
