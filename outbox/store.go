package outbox

import (
	"context"
	"time"

	"github.com/tabfence/tabfence/outbox/queue"
)

// Store is the durable queue. Every method is ONE atomic transaction, and the
// only thing a method runs between its requests is pure Go (queue.PlanEnqueue,
// queue.PlanClaim, the fn arguments), so it can be implemented on IndexedDB, whose
// transactions die when anything awaits a later task.
type Store interface {
	// Enqueue reads the unsettled records of req.Record.UserID with the same
	// OperationKey or the same EntityKey (blob payloads loaded), runs
	// queue.PlanEnqueue, assigns Put.Seq from a monotonic counter when the plan
	// appends, writes Put (and Blob under Put.PayloadRef, deleting DeleteBlob),
	// and returns the plan's Result with the stored Seq. It returns only after
	// the transaction committed. req.Record.CreatedAt is the enqueue time.
	Enqueue(ctx context.Context, req queue.EnqueueRequest) (queue.EnqueueResult, error)
	// Claim checks that req.Lease is the current lease of req.Lease.Name
	// (same Owner and Token, else queue.ErrStaleOwner), runs queue.PlanClaim over the
	// unacked records, writes plan.Put (the in-flight records it recovered
	// from a dead or superseded owner; usually none) and returns
	// plan.Claimed. The claimed records are a plan, not written: they stay
	// waiting until the flush takes each with UpdateBatch (RecordUpdate.Take,
	// the queue.Charge transition) just before sending it, so a record costs one
	// write fewer. Between the two, only this lease's owner can take them,
	// and Charge re-checks that each is still waiting and due.
	Claim(ctx context.Context, req queue.ClaimRequest) ([]queue.Record, error)
	// UpdateBatch changes records under a lease in ONE transaction: it
	// checks once that lease is the current lease (else queue.ErrStaleOwner and
	// nothing changes), then applies ups in order, each to a copy of its
	// record: a record that is absent (ErrNotFound) or not leased to
	// lease.Owner/lease.Token (queue.ErrStaleOwner; a Take update skips this check
	// and its Fn decides), or whose Fn fails, is left
	// unchanged and reported in its UpdateResult; the others are written. An update sees the record as
	// left by the earlier ones of the batch, and its Fn runs only after the
	// earlier Fns ran, so a Fn may depend on an earlier one's outcome. The
	// error is non-nil only when nothing was written (stale lease, context
	// done before the writes, storage failure). The flush uses it to settle a
	// record and charge the next one of its entity together, and to commit
	// the steps of concurrent lanes as one transaction.
	UpdateBatch(ctx context.Context, lease queue.Lease, ups []RecordUpdate) ([]UpdateResult, error)
	// Amend applies an app action (retry, discard-like edits) without a
	// lease: fn itself refuses records that are in flight.
	Amend(ctx context.Context, id string, fn func(*queue.Record) error) (queue.Record, error)
	// Delete removes the records matching f (and their blobs) and returns how many.
	Delete(ctx context.Context, f Filter) (int, error)
	// Get returns one record (Payload empty if it lives in the blob store).
	Get(ctx context.Context, id string) (queue.Record, error)
	// List returns the records matching f in Seq order.
	List(ctx context.Context, f Filter) ([]queue.Record, error)
	// Payload loads a blob-store payload by PayloadRef.
	Payload(ctx context.Context, ref string) ([]byte, error)
	// Status returns the projection every tab renders.
	Status(ctx context.Context) (Projection, error)
	// GetLease reads the lease row of name.
	GetLease(ctx context.Context, name string) (queue.Lease, bool, error)
	// UpdateLease runs fn on the lease row of name (found=false: none yet)
	// and writes its result unless it fails. queue.AcquireLease, RenewLease and
	// ReleaseLease are the fns.
	UpdateLease(ctx context.Context, name string, fn func(cur queue.Lease, found bool) (queue.Lease, error)) (queue.Lease, error)
	// UpdateMeta runs fn on the queue's metadata (pause state, last flush,
	// last error) and writes it unless it fails.
	UpdateMeta(ctx context.Context, fn func(*Meta) error) (Meta, error)
}

// RecordUpdate is one record change of UpdateBatch.
type RecordUpdate struct {
	ID string
	Fn func(*queue.Record) error
	// Take: the record need not be leased to the batch's lease yet: Fn
	// takes it (Charge: a waiting record the claim planned) and refuses
	// any other. The batch's lease check holds as for every update.
	Take bool
}

// UpdateResult is the outcome of one RecordUpdate: the record as written,
// or (Err != nil: unchanged) as found.
type UpdateResult struct {
	Record queue.Record
	Err    error
}

// Filter selects records. Zero fields match everything.
type Filter struct {
	IDs              []string
	UserID           string
	Statuses         []queue.Status
	MinSchemaVersion int // records with PayloadSchemaVersion >= this
	// AckedBefore selects acked records acknowledged before this time
	// (compaction); zero matches regardless of status or age.
	AckedBefore time.Time
	Limit       int
}

// Match reports whether r passes f (Limit aside).
func (f *Filter) Match(r *queue.Record) bool {
	if f.UserID != "" && r.UserID != f.UserID {
		return false
	}
	if f.MinSchemaVersion > 0 && r.PayloadSchemaVersion < f.MinSchemaVersion {
		return false
	}
	if !f.AckedBefore.IsZero() && (r.Status != queue.StatusAcked || !r.AckedAt.Before(f.AckedBefore)) {
		return false
	}
	if len(f.IDs) > 0 && !contains(f.IDs, r.ID) {
		return false
	}
	if len(f.Statuses) > 0 {
		ok := false
		for _, s := range f.Statuses {
			ok = ok || s == r.Status
		}
		if !ok {
			return false
		}
	}
	return true
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// Meta is the queue's durable, shared metadata.
type Meta struct {
	Paused      bool     // paused by the app for everyone
	AuthPaused  []string // users waiting for re-authentication (401)
	LastFlushAt time.Time
	LastError   *queue.ErrorInfo // the last error; cleared when a failure spell ends
	Failure     SendFailure      // the flush owner's last failure to send (see SendFailure)
	// Session is the queue's session, every tab's (session.go).
	Session Session
	// SessionHeld: the receiver refused a record of this user as another
	// user's (403 session-mismatch); their records wait for the next Login.
	SessionHeld string
}

// Projection is the status every tab renders ("3 changes pending").
type Projection struct {
	Pending, Sending, Failed, DeadLetter, Conflict, Terminal, Acked int
	Unsupported                                                     int // newer payload schema, left alone (filled by Outbox.Status)
	OldestPendingAt                                                 time.Time
	OldestPendingAge                                                time.Duration // filled by Outbox.Status
	// LastAckAt is when the acked record enqueued last (the highest seq)
	// was acked: about when the flush owner last made progress, which the
	// Watchdog times a stall from. Zero when no acked record is kept.
	LastAckAt time.Time
	Meta
}

// ProjectRecords computes the counts of a Projection; a Store may use it.
func ProjectRecords(recs []queue.Record, meta Meta) Projection {
	p := Projection{Meta: meta}
	var lastAcked uint64
	for i := range recs {
		r := &recs[i]
		if r.Status == queue.StatusAcked && (p.LastAckAt.IsZero() || r.Seq > lastAcked) {
			p.LastAckAt, lastAcked = r.AckedAt, r.Seq
		}
		switch r.Status {
		case queue.StatusPending:
			p.Pending++
		case queue.StatusLeased, queue.StatusSending:
			p.Sending++
		case queue.StatusFailed:
			p.Failed++
		case queue.StatusDeadLetter:
			p.DeadLetter++
		case queue.StatusConflict:
			p.Conflict++
		case queue.StatusTerminalFailed:
			p.Terminal++
		case queue.StatusAcked:
			p.Acked++
		}
		if !r.Status.Settled() && (p.OldestPendingAt.IsZero() || r.CreatedAt.Before(p.OldestPendingAt)) {
			p.OldestPendingAt = r.CreatedAt
		}
	}
	return p
}

// Clone is a deep copy of m, which a Store hands out or keeps.
func (m Meta) Clone() Meta {
	m.AuthPaused = append([]string(nil), m.AuthPaused...)
	if m.LastError != nil {
		e := *m.LastError
		m.LastError = &e
	}
	return m
}
