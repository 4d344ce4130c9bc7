package outbox

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tabfence/tabfence/internal/randid"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// Config configures an Outbox. Store, Transport and Policies are required.
type Config struct {
	Name string // queue scope; the lease is named Names(Name, Protocol).Lease
	// Protocol is the queue's compatibility with the server (default 1):
	// queues of different protocols share nothing (see Names).
	Protocol  int
	Store     Store
	Transport Transport
	Clock     Clock  // default SystemClock
	Events    Events // default: none
	Endpoint  string // default "/api/commands"
	// Policies maps OperationType to its dedupe policy. An operation type
	// without one is refused: dedupe is domain logic, never guessed.
	Policies    map[string]queue.Policy
	MaxAttempts int // default 10
	Backoff     *Backoff
	InlineLimit int // payloads above this many bytes go to the blob store; default 64 KiB, <0: never

	// BatchSize is the records per claim; default 50. Each batch costs the
	// flush a few transactions in a row on its path (the lanes' last acks,
	// lease renewal, meta read, claim, first charge) and its lanes wait for
	// each other at its end (docs/outbox-notes.md). A claim's transaction
	// reads about this many records.
	BatchSize        int
	MaxFlushDuration time.Duration // deadline of one Flush; default 20s
	Concurrency      int           // independent entities sent at once; default 4, 1: no goroutines
	LeaseTTL         time.Duration // record and fallback-lease lifetime; default 30s
	// ChargeAhead is how many records of an entity may be charged (attempt
	// counted, status sending) before they are sent. The flush charges them
	// in steps of ChargeAhead/2, one step ahead of its sends, each step's
	// transaction also writing the acks of earlier records: fewer
	// transactions per record, and each runs while requests are on the
	// network. The price is that a tab that dies mid-flush leaves up to
	// ChargeAhead-1 records charged an attempt they never made (never the
	// reverse). 1: each record is charged in its own step, with the ack of
	// the one before, exactly. Default 8.
	ChargeAhead int

	// BatchEndpoint is the path or URL of the receiver's batch route
	// (receiver.HandleBatch). "" (the default) sends one POST per record.
	// Set, the flush sends its due records in batch requests of the wire
	// batch format, each mutation with its own idempotency key, so a batch
	// resent after a lost answer is replayed mutation by mutation and a
	// record may move between batches. A receiver that does not speak the
	// format makes this Outbox fall back to one POST per record (batch.go).
	// A record is batched only when its single request goes to the batch
	// endpoint's origin: both paths, or absolute URLs of one origin, as the
	// Transport resolves them (Resolver: fetch's BaseURL); others go alone.
	BatchEndpoint string
	// BatchMax is the mutations per batch request; default 100 (the
	// receiver's default MaxBatch). A 413 halves it for this Outbox.
	BatchMax int
	// BatchMaxBytes bounds a batch request's body; default 512 KiB, under
	// the receiver's default 1 MiB body limit. A page is cut before the
	// mutation that would pass it; a record larger alone is sent alone.
	BatchMaxBytes int

	SchemaVersion int // payload schema of new records; default 1
	Migrations    []queue.Migration

	NewID func() string // record ids and idempotency keys; default 128 random bits, hex
	// OnAuthRequired is called (at most once per Flush) when the receiver
	// answered 401: the user's queue is paused until the app calls Resume.
	OnAuthRequired func(userID string)
}

// Outbox is one tab's handle on the shared queue.
type Outbox struct {
	cfg      Config
	lockName string
	// started: when this runtime began (SchemaGate.Since).
	started time.Time

	sessionHook changeHook     // OnSessionChange
	pending     pendingAppends // PlainAppend's records not yet reported

	mu      sync.Mutex
	session Session       // this tab's session: new records' (session.go)
	queue   Session       // this tab's view of the queue's session: what is sent
	heard   atomic.Uint64 // the newest session generation announced (NoteSession)
	// reconnected: when the device last regained network (Reconnected),
	// in Unix nanoseconds; 0: never.
	reconnected atomic.Int64
	batch       batchState // what this Outbox learnt of the batch endpoint
}

// New validates cfg and applies defaults.
func New(cfg Config) (*Outbox, error) {
	if cfg.Store == nil || cfg.Transport == nil || len(cfg.Policies) == 0 {
		return nil, queue.ErrInvalidRecord
	}
	for _, p := range cfg.Policies {
		if p.Dedupe.Merges() && p.Merge == nil {
			return nil, queue.ErrInvalidRecord
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.Events == nil {
		cfg.Events = EventsFunc(func(Event) {})
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "/api/commands"
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 10
	}
	if cfg.Backoff == nil {
		cfg.Backoff = &Backoff{}
	}
	if cfg.InlineLimit == 0 {
		cfg.InlineLimit = 64 << 10
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = 50
	}
	if cfg.MaxFlushDuration <= 0 {
		cfg.MaxFlushDuration = 20 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 30 * time.Second
	}
	if cfg.ChargeAhead <= 0 {
		cfg.ChargeAhead = 8
	}
	if cfg.BatchMax <= 0 {
		cfg.BatchMax = 100
	}
	if cfg.BatchMaxBytes <= 0 {
		cfg.BatchMaxBytes = 512 << 10
	}
	if cfg.SchemaVersion <= 0 {
		cfg.SchemaVersion = 1
	}
	if cfg.Protocol <= 0 {
		cfg.Protocol = 1
	}
	if cfg.NewID == nil {
		cfg.NewID = randomID
	}
	return &Outbox{cfg: cfg, lockName: queue.LeaseName(cfg.Name, cfg.Protocol), started: cfg.Clock.Now()}, nil
}

// SchemaGate is this runtime's rule of which records it sends, migrates or
// leaves alone.
func (o *Outbox) SchemaGate() queue.SchemaGate {
	return queue.SchemaGate{Version: o.cfg.SchemaVersion, Migrations: o.cfg.Migrations, Since: o.started}
}

// randomID is a random 128-bit id (hex) from the platform's CSPRNG; see
// internal/randid for why the browser build does not link crypto/rand. The
// bytes are drawn 32 ids at a time: in the browser each draw is a typed
// array, getRandomValues and a copy, which every enqueue (an id and an
// idempotency key) would otherwise pay twice.
func randomID() string {
	idPool.mu.Lock()
	defer idPool.mu.Unlock()
	if idPool.n == 0 {
		randid.Read(idPool.buf[:])
		idPool.n = len(idPool.buf)
	}
	idPool.n -= 16
	id := randid.Hex(idPool.buf[idPool.n : idPool.n+16])
	clear(idPool.buf[idPool.n : idPool.n+16]) // used bytes do not linger
	return id
}

var idPool struct {
	mu  sync.Mutex
	buf [32 * 16]byte
	n   int
}

// LockName is the Web Lock / lease name of this queue scope.
func (o *Outbox) LockName() string { return o.lockName }

// Reconnected tells the outbox that the device regained network (in the
// browser, the online event). A record whose last attempt failed for want
// of network (error code "network" or "offline") before now is due at once
// instead of waiting out its backoff: a queue filled while offline drains
// when the network returns, not minutes later. Backoffs the receiver asked
// for (429, 5xx, Retry-After) are kept. It only schedules; the caller
// triggers the flush.
func (o *Outbox) Reconnected() { o.reconnected.Store(o.cfg.Clock.Now().UnixNano()) }

func (o *Outbox) reconnectedAt() time.Time {
	if n := o.reconnected.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Op is one mutation to enqueue.
type Op struct {
	OperationType string // selects the Policy
	OperationKey  string // dedupe key; empty: never coalesced
	EntityType    string
	EntityID      string
	Payload       []byte
	DependencyIDs []string
}

// Enqueue durably records op for the current user and returns once the
// store committed. The caller then announces OUTBOX_CHANGED.
func (o *Outbox) Enqueue(ctx context.Context, op Op) (queue.EnqueueResult, error) {
	req, err := o.request(op)
	if err != nil {
		return queue.EnqueueResult{}, err
	}
	res, err := o.cfg.Store.Enqueue(ctx, req)
	if err != nil {
		return res, err
	}
	o.enqueued(op, req, res)
	return res, nil
}

// request builds the store request of op under the current session: the
// record of a new mutation, its policy and the inline limit.
func (o *Outbox) request(op Op) (queue.EnqueueRequest, error) {
	s := o.Session()
	if s.UserID == "" {
		return queue.EnqueueRequest{}, ErrNoSession
	}
	pol, ok := o.cfg.Policies[op.OperationType]
	if !ok {
		return queue.EnqueueRequest{}, queue.ErrUnknownOperation
	}
	now := o.cfg.Clock.Now()
	max := pol.MaxAttempts
	if max <= 0 {
		max = o.cfg.MaxAttempts
	}
	key := o.cfg.NewID()
	if !wire.ValidKey(key) {
		return queue.EnqueueRequest{}, queue.ErrInvalidRecord
	}
	rec := queue.Record{
		ID: o.cfg.NewID(), OperationKey: op.OperationKey, IdempotencyKey: key,
		EntityType: op.EntityType, EntityID: op.EntityID, OperationType: op.OperationType,
		Payload: op.Payload, PayloadSchemaVersion: o.cfg.SchemaVersion,
		Status: queue.StatusPending, MaxAttempts: max, NextAttemptAt: now,
		DependencyIDs: append([]string(nil), op.DependencyIDs...),
		CreatedAt:     now, UpdatedAt: now,
		UserID: s.UserID, TenantID: s.TenantID, AuthGeneration: s.AuthGeneration,
	}
	return queue.EnqueueRequest{Record: rec, Policy: pol, InlineLimit: o.cfg.InlineLimit}, nil
}

// enqueued emits the enqueue event of a committed request.
func (o *Outbox) enqueued(op Op, req queue.EnqueueRequest, res queue.EnqueueResult) {
	o.emit(Event{Kind: EventEnqueue, At: req.Record.CreatedAt, RecordID: res.ID, OperationKeyHash: HashKey(op.OperationKey), Reason: string(res.Action)})
}

// Status returns the shared projection, with the oldest pending age and the
// count of records this runtime leaves alone for their payload schema
// (SchemaGate: newer, without a migration path, or whose migration failed).
func (o *Outbox) Status(ctx context.Context) (Projection, error) {
	var p Projection
	var err error
	gate := o.SchemaGate()
	if ss, ok := o.cfg.Store.(schemaStatuser); ok {
		if p, err = ss.StatusSchema(ctx, gate); err != nil {
			return p, err
		}
	} else {
		if p, err = o.cfg.Store.Status(ctx); err != nil {
			return p, err
		}
		unsup, err := o.Unsupported(ctx)
		if err != nil {
			return p, err
		}
		p.Unsupported = len(unsup)
	}
	p.hideIdleFailure()
	if !p.OldestPendingAt.IsZero() {
		p.OldestPendingAge = o.cfg.Clock.Now().Sub(p.OldestPendingAt)
	}
	return p, nil
}

// schemaStatuser is a Store whose status read also counts the unsettled
// records gate leaves alone (Projection.Unsupported) from an index of the
// payload schema, instead of a second scan of the whole queue (idbstore.Store: the
// status read runs again after each burst of enqueues, and records of
// another schema than the runtime's are rare).
type schemaStatuser interface {
	StatusSchema(ctx context.Context, gate queue.SchemaGate) (Projection, error)
}

// Unsupported lists the unsettled records this runtime leaves alone for
// their payload schema (SchemaGate), in seq order: never sent, never
// deleted by the runtime, waiting for a build that can send them.
func (o *Outbox) Unsupported(ctx context.Context) ([]queue.Record, error) {
	// Only unsettled records count, so only those are read: the acked
	// history, which can be long, is not decoded.
	recs, err := o.cfg.Store.List(ctx, Filter{Statuses: []queue.Status{queue.StatusPending, queue.StatusLeased, queue.StatusSending, queue.StatusFailed}})
	if err != nil {
		return nil, err
	}
	gate := o.SchemaGate()
	out := recs[:0]
	for i := range recs {
		if gate.Unsupported(&recs[i]) {
			out = append(out, recs[i])
		}
	}
	return out, nil
}

// DeadLetters lists the records that need the app: dead letters, conflicts
// and terminal failures.
func (o *Outbox) DeadLetters(ctx context.Context) ([]queue.Record, error) {
	return o.cfg.Store.List(ctx, Filter{Statuses: []queue.Status{queue.StatusDeadLetter, queue.StatusConflict, queue.StatusTerminalFailed}})
}

// Retry puts a dead-letter, conflict or terminal record back in the queue.
func (o *Outbox) Retry(ctx context.Context, id string) error {
	now := o.cfg.Clock.Now()
	_, err := o.cfg.Store.Amend(ctx, id, func(r *queue.Record) error {
		n, err := queue.AppRetry(*r, now)
		*r = n
		return err
	})
	return err
}

// Discard deletes a dead-letter, conflict or terminal record: the app has
// resolved it. Waiting and in-flight records cannot be discarded.
func (o *Outbox) Discard(ctx context.Context, id string) error {
	n, err := o.cfg.Store.Delete(ctx, Filter{IDs: []string{id}, Statuses: []queue.Status{queue.StatusDeadLetter, queue.StatusConflict, queue.StatusTerminalFailed}})
	if err != nil || n == 1 {
		return err
	}
	r, err := o.cfg.Store.Get(ctx, id)
	if err != nil {
		return err
	}
	return queue.TransitionError("discard", r.Status)
}

// Pause stops every flush (all tabs) until Resume.
func (o *Outbox) Pause(ctx context.Context) error {
	_, err := o.cfg.Store.UpdateMeta(ctx, func(m *Meta) error { m.Paused = true; return nil })
	return err
}

// Resume lifts the app pause and the auth pause of the queue's current
// user (call it after re-authenticating). The user is the stored session's,
// not this tab's view of it, which may lag another tab's login.
func (o *Outbox) Resume(ctx context.Context) error {
	_, err := o.cfg.Store.UpdateMeta(ctx, func(m *Meta) error {
		m.Paused = false
		m.AuthPaused = removeString(m.AuthPaused, m.Session.UserID)
		if m.Failure.Kind == FailurePausedAuth {
			m.Failure = SendFailure{} // the next flush tells
		}
		return nil
	})
	return err
}

func removeString(xs []string, x string) []string {
	out := xs[:0]
	for _, v := range xs {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

// Acquire takes the flush lease for owner with a higher token. Call it with
// steal=true while holding the Web Lock (or when stealing it from a frozen
// owner), steal=false for the IndexedDB fallback without Web Locks (fails
// with queue.ErrLeaseHeld while another owner's lease is unexpired). The caller sets
// Resource and FenceToken (issued by POST /fence/{resource}) before Flush.
func (o *Outbox) Acquire(ctx context.Context, owner string, steal bool) (queue.Lease, error) {
	now := o.cfg.Clock.Now()
	return o.cfg.Store.UpdateLease(ctx, o.lockName, queue.AcquireLease(owner, now, o.cfg.LeaseTTL, steal))
}

// Release expires l at once if it is still current.
func (o *Outbox) Release(ctx context.Context, l queue.Lease) error {
	_, err := o.cfg.Store.UpdateLease(ctx, o.lockName, queue.ReleaseLease(l, o.cfg.Clock.Now()))
	return err
}

func (o *Outbox) emit(e Event) { o.cfg.Events.Emit(e) }

// Config is the outbox's configuration with its defaults filled in.
func (o *Outbox) Config() Config { return o.cfg }

// SkippedLocked records that a flush trigger found the lock taken (Web Lock
// ifAvailable returned no lock, or the fallback lease is held): the lock
// deduplicated the work. reason names the trigger.
func (o *Outbox) SkippedLocked(owner, reason string) {
	o.emit(Event{Kind: EventSkipLocked, At: o.cfg.Clock.Now(), Owner: owner, Reason: reason})
}
