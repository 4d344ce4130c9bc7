package queue

import "time"

// Dedupe is how an enqueue treats earlier records with the same operation
// key. It is domain logic, so it is configured per operation type.
type Dedupe string

const (
	// Append keeps every operation: distinct business facts (comments,
	// payments, audit events, messages) must use it.
	Append Dedupe = "append"
	// ReplaceLatest overwrites the payload of the latest waiting record with
	// the same operation key (e.g. "set draft title").
	ReplaceLatest Dedupe = "replace-latest"
	// Merge combines the payload of the latest waiting record with the new
	// one through Policy.Merge.
	Merge Dedupe = "merge"
	// DropIfExists drops the new operation when one with the same key is
	// still waiting or in flight.
	DropIfExists Dedupe = "drop-if-exists"
)

// MergeFunc combines an earlier payload with a newer one. It must be pure and
// deterministic: it runs inside the Store's transaction.
type MergeFunc func(older, newer []byte) ([]byte, error)

// Policy configures one operation type.
type Policy struct {
	Dedupe      Dedupe
	Merge       MergeFunc // required for Merge
	MaxAttempts int       // 0: the Outbox default
	Endpoint    string    // "": the Outbox default
}

// dedupeRule is what one policy does at enqueue with the latest unsettled
// record of the same operation key (PlanEnqueue): nothing (append),
// coalesce into it while the server cannot have seen it (coalesces:
// replace, or merge through Policy.Merge), or drop the new operation
// (drops). A Store reads the entity's unsettled records for the policies
// that coalesce (Policy.ReadsEntity), so coalescing never reorders an
// entity's operations.
type dedupeRule struct {
	name      Dedupe
	coalesces bool
	merges    bool // coalesces through Policy.Merge, which it requires
	drops     bool
}

// dedupeRules is the table of dedupe policies: adding a policy is adding
// its row. The JavaScript API accepts exactly these names (DedupePolicies).
var dedupeRules = [...]dedupeRule{
	{name: Append},
	{name: ReplaceLatest, coalesces: true},
	{name: Merge, coalesces: true, merges: true},
	{name: DropIfExists, drops: true},
}

// DedupePolicies lists every dedupe policy, in the table's order: what a
// binding accepts and documents (tabfence.d.ts's Dedupe union is checked
// against it).
func DedupePolicies() []Dedupe {
	out := make([]Dedupe, len(dedupeRules))
	for i, r := range dedupeRules {
		out[i] = r.name
	}
	return out
}

func (d Dedupe) rule() (dedupeRule, bool) {
	for _, r := range dedupeRules {
		if r.name == d {
			return r, true
		}
	}
	return dedupeRule{}, false
}

// known reports whether d is a policy of the table.
func (d Dedupe) known() bool {
	_, ok := d.rule()
	return ok
}

// Known reports whether d is a policy of the table (DedupePolicies).
func (d Dedupe) Known() bool { return d.known() }

// Merges reports whether d combines payloads through Policy.Merge, which
// it then requires.
func (d Dedupe) Merges() bool {
	r, _ := d.rule()
	return r.merges
}

// ReadsEntity reports whether an enqueue under p with key opKey must also
// read its entity's unsettled records: the policy may coalesce, and only
// into the entity's latest record.
func (p Policy) ReadsEntity(opKey string) bool {
	r, _ := p.Dedupe.rule()
	return r.coalesces && p.ReadsQueue(opKey)
}

// ReadsQueue reports whether an enqueue of an operation with key opKey
// under p must read the queue first: a dedupe policy coalesces by operation
// key. One that does not is an append whatever the queue holds.
func (p Policy) ReadsQueue(opKey string) bool { return p.Dedupe != Append && opKey != "" }

// Inlines reports whether a payload of n bytes is stored in its record,
// else in a blob of its own (see placePayload).
func (r EnqueueRequest) Inlines(n int) bool { return inlines(n, r.InlineLimit) }

func inlines(n, inlineLimit int) bool { return inlineLimit <= 0 || n <= inlineLimit }

// Action says what an enqueue did.
type Action string

const (
	ActionAppended Action = "appended"
	ActionReplaced Action = "replaced"
	ActionMerged   Action = "merged"
	ActionDropped  Action = "dropped"
)

// EnqueueRequest is one enqueue, applied by outbox.Store.Enqueue in one transaction.
// Record.Payload holds the full payload; Record.Seq is assigned by the store.
type EnqueueRequest struct {
	Record      Record
	Policy      Policy
	InlineLimit int // payloads longer than this go to the blob store; <=0: always inline
}

// EnqueueResult reports the record the operation now lives in.
type EnqueueResult struct {
	ID     string
	Action Action
	Record Record // as stored (Payload empty when it went to the blob store)
}

// EnqueuePlan is what a Store must write for an enqueue: Put (with Blob under
// Put.PayloadRef when that is set), and DeleteBlob when a replaced payload
// leaves the blob store.
type EnqueuePlan struct {
	Put        Record
	Write      bool // false: nothing to write (dropped)
	Blob       []byte
	DeleteBlob string
	Result     EnqueueResult
}

// PlanEnqueue decides an enqueue. related must hold every unsettled record of
// the same user with the same operation key or the same entity, with full
// payloads (blob payloads loaded). It is pure, so a Store runs it inside its
// transaction.
//
// Replace and merge only touch a record that the server cannot have seen
// (waiting, never handed to the transport) and that is the latest unsettled
// record of its entity, so coalescing never reorders operations nor reuses an
// idempotency key with another payload; otherwise the operation is appended.
func PlanEnqueue(related []Record, req EnqueueRequest, now time.Time) (EnqueuePlan, error) {
	in := req.Record
	if in.ID == "" || in.IdempotencyKey == "" || in.UserID == "" {
		return EnqueuePlan{}, ErrInvalidRecord
	}
	var latest *Record // latest unsettled record with the same operation key
	var entityTail uint64
	key := in.EntityKey()
	for i := range related {
		r := &related[i]
		if r.UserID != in.UserID || r.Status.Settled() {
			continue
		}
		if r.EntityKey() == key && r.Seq > entityTail {
			entityTail = r.Seq
		}
		if in.OperationKey != "" && r.OperationKey == in.OperationKey && (latest == nil || r.Seq > latest.Seq) {
			latest = r
		}
	}
	rule, ok := req.Policy.Dedupe.rule()
	switch {
	case !ok:
		return EnqueuePlan{}, ErrUnknownOperation
	case rule.drops:
		if latest != nil {
			return EnqueuePlan{Result: EnqueueResult{ID: latest.ID, Action: ActionDropped, Record: *latest}}, nil
		}
	case rule.coalesces:
		if latest == nil || !latest.Status.Waiting() || latest.Sends > 0 || latest.Seq < entityTail {
			break
		}
		payload, action := in.Payload, ActionReplaced
		if rule.merges {
			if req.Policy.Merge == nil {
				return EnqueuePlan{}, ErrInvalidRecord
			}
			m, err := req.Policy.Merge(latest.Payload, in.Payload)
			if err != nil {
				return EnqueuePlan{}, err
			}
			payload, action = m, ActionMerged
		}
		put := latest.Clone()
		oldRef := put.PayloadRef
		put.PayloadSchemaVersion = in.PayloadSchemaVersion
		put.AuthGeneration = in.AuthGeneration
		put.NextAttemptAt, put.UpdatedAt = now, now
		plan := placePayload(put, payload, req.InlineLimit)
		if oldRef != "" && oldRef != plan.Put.PayloadRef {
			plan.DeleteBlob = oldRef
		}
		plan.Result = EnqueueResult{ID: put.ID, Action: action, Record: plan.Put}
		return plan, nil
	}
	in.Status = StatusPending
	in.CreatedAt, in.UpdatedAt = now, now
	if in.NextAttemptAt.IsZero() {
		in.NextAttemptAt = now
	}
	plan := placePayload(in, in.Payload, req.InlineLimit)
	plan.Result = EnqueueResult{ID: in.ID, Action: ActionAppended, Record: plan.Put}
	return plan, nil
}

// placePayload stores p inline or by reference, and hashes it.
func placePayload(r Record, p []byte, inlineLimit int) EnqueuePlan {
	r.PayloadHash = HashPayload(p)
	if !inlines(len(p), inlineLimit) {
		r.PayloadRef = "blob:" + r.ID
		r.Payload = nil
		return EnqueuePlan{Put: r, Write: true, Blob: append([]byte(nil), p...)}
	}
	r.PayloadRef = ""
	r.Payload = append([]byte(nil), p...)
	return EnqueuePlan{Put: r, Write: true}
}
