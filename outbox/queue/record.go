package queue

import (
	"time"

	"github.com/tabfence/tabfence/internal/digest"
	"github.com/tabfence/tabfence/internal/randid"
)

// Status is a record's place in the queue state machine.
type Status string

// Statuses. Acked, TerminalFailed, DeadLetter and Conflict are settled: the
// flusher never leaves them; only the app (Retry, Discard) does, and the last
// three block their entity until it does. Leased and Sending are in flight and
// always carry a lease expiry, so a dead owner can never strand them.
const (
	StatusPending        Status = "pending"          // waiting, never attempted (or attempt refunded)
	StatusLeased         Status = "leased"           // claimed by a flush owner, not yet sent
	StatusSending        Status = "sending"          // handed to the transport
	StatusAcked          Status = "acked"            // 2xx; Response kept
	StatusFailed         Status = "retryable_failed" // waits for NextAttemptAt
	StatusTerminalFailed Status = "terminal_failed"  // 4xx that retrying cannot fix
	StatusDeadLetter     Status = "dead_letter"      // MaxAttempts exhausted
	StatusConflict       Status = "conflict"         // 409 business conflict; the app resolves
)

// Settled reports whether the flusher will never move the record again.
func (s Status) Settled() bool {
	return s == StatusAcked || s.Blocking()
}

// Blocking reports whether the record stops its entity (and its dependents)
// until the app retries or discards it.
func (s Status) Blocking() bool {
	return s == StatusTerminalFailed || s == StatusDeadLetter || s == StatusConflict
}

// InFlight reports whether a flush owner holds the record.
func (s Status) InFlight() bool { return s == StatusLeased || s == StatusSending }

// Waiting reports whether the record waits to be (re)sent.
func (s Status) Waiting() bool { return s == StatusPending || s == StatusFailed }

// ErrorInfo is the last error of a record: a stable code and a short message.
// It never contains the payload or any credential.
type ErrorInfo struct {
	Code    string // e.g. "http_503", "network", "lease_expired", "schema_unsupported"
	Message string
	Status  int // HTTP status, 0 for none
	At      time.Time
}

// Short bounds an error message kept in a record (ErrorInfo.Message) or
// an event to 200 bytes.
func Short(s string) string {
	if len(s) > 200 {
		return s[:200]
	}
	return s
}

// StoredResponse is the receiver's answer kept on ack.
type StoredResponse struct {
	Status   int
	Body     []byte
	Replayed bool // Idempotent-Replayed: the server had already applied it
}

// Record is one durable outbox entry (reference section 4 plus session
// fields). There is deliberately no access-token field: credentials are
// attached by the Transport at send time.
type Record struct {
	ID             string // local immutable id, sent as X-Client-Operation-Id
	OperationKey   string // semantic dedupe key (replace/merge/drop target)
	IdempotencyKey string // server duplicate-suppression key; stable across retries
	EntityType     string
	EntityID       string // empty: the record is its own ordering group
	OperationType  string // selects the Policy

	Payload              []byte // inline payload; empty when PayloadRef is set
	PayloadRef           string // blob-store key for payloads above the inline limit
	PayloadHash          string // sha256 hex of the full payload
	PayloadSchemaVersion int

	Status        Status
	Attempts      int // charged attempts (401 and step-down are refunded)
	Sends         int // times handed to the transport, never refunded
	MaxAttempts   int
	NextAttemptAt time.Time
	LastError     *ErrorInfo

	LeaseOwner     string
	LeaseToken     uint64
	LeaseExpiresAt time.Time

	DependencyIDs []string
	Seq           uint64 // monotonic enqueue order, assigned by the Store
	CreatedAt     time.Time
	UpdatedAt     time.Time
	AckedAt       time.Time
	Response      *StoredResponse

	UserID         string
	TenantID       string
	AuthGeneration uint64
}

// Clone returns a deep copy, so stores never share slices with callers.
func (r Record) Clone() Record {
	c := r
	if r.Payload != nil {
		c.Payload = append([]byte(nil), r.Payload...)
	}
	if r.DependencyIDs != nil {
		c.DependencyIDs = append([]string(nil), r.DependencyIDs...)
	}
	if r.LastError != nil {
		e := *r.LastError
		c.LastError = &e
	}
	if r.Response != nil {
		resp := *r.Response
		resp.Body = append([]byte(nil), r.Response.Body...)
		c.Response = &resp
	}
	return c
}

// EntityKey groups records that must be sent in order: same user, tenant,
// entity type and id. A record without EntityID is a group of its own.
func (r *Record) EntityKey() string {
	if r.EntityID == "" {
		return "\x01" + r.ID
	}
	return r.UserID + "\x00" + r.TenantID + "\x00" + r.EntityType + "\x00" + r.EntityID
}

// HashPayload is the PayloadHash of p: lowercase sha256 hex (internal/digest,
// which keeps crypto/sha256's FIPS module out of the wasm download).
func HashPayload(p []byte) string {
	s := digest.SHA256(p)
	return randid.Hex(s[:])
}

// Lease is the flush ownership a Store fences record changes with. Name,
// Owner, Token and ExpiresAt are persisted (the IndexedDB lease row); Token
// only ever grows. Resource and FenceToken are the server-issued fencing
// token of this owner (POST /fence/{resource}), sent with every request.
type Lease struct {
	Name       string
	Owner      string
	Token      uint64
	ExpiresAt  time.Time
	UpdatedAt  time.Time
	Resource   string
	FenceToken uint64
}
