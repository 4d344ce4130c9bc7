// Package idb is tabfence's IndexedDB layer: a versioned database that lets
// go when another tab deletes or upgrades it, per-resource fencing tokens,
// and a receiver fence that applies an operation together with the caller's
// own writes in one transaction — or not at all.
//
// The invariant it enforces is the one of the fencing-token reference: a
// receiver never accepts a side effect from an epoch (token) older than the
// highest it has already accepted for that resource, and it checks that
// atomically with the write it guards. Leadership cannot enforce itself once
// it is stale; the receiver does.
//
// The decision logic (this file) is pure Go, tested natively and
// exhaustively; the IndexedDB plumbing lives in *_js.go files, on a raw
// request and transaction layer (package idb/raw) that the
// outbox's store uses too.
//
// Content-Security-Policy: the hot transactions (token allocation, the
// fence's part of an apply) run through the loader's idb hooks (fast.js),
// an ES module the loader imports, with Go judging inside the read's success
// event through a wasm export: no eval. Without the loader they take the Go
// path, with the same results. WebAssembly itself needs
// 'wasm-unsafe-eval'.
package idb

import (
	"errors"
	"strconv"
)

// MaxToken is the largest fencing token, 2^53-1: tokens are stored as
// JavaScript numbers, which hold integers exactly only up to there.
const MaxToken = 1<<53 - 1

// DefaultRecentOps is how many applied operation IDs a fence remembers per
// resource unless WithRecentOps says otherwise.
const DefaultRecentOps = 64

// MaxRecentOps caps WithRecentOps: 4096 IDs of at most 255 bytes fit the
// 1 MiB a stored fence may hold before it is read as corrupt.
const MaxRecentOps = 4096

// maxRecentLen bounds the stored list of remembered operation IDs before a
// fence is considered corrupt (a foreign huge string must not be copied).
const maxRecentLen = 1 << 20

// Limits on what an operation may carry, so a fence record stays small.
const (
	MaxResourceLen    = 200
	MaxOperationIDLen = 255
)

// Result is the outcome of offering an operation to a fence.
type Result int

const (
	// Accepted: the operation was new and fresh; the caller's writes and the
	// advanced fence committed together.
	Accepted Result = iota + 1
	// Duplicate: the operation was already applied (its ID is remembered, or
	// its sequence is not past the highest applied under the current token).
	// Nothing was written.
	Duplicate
	// Stale: the operation's token is older than the highest accepted for
	// the resource. Nothing was written; the sender has lost leadership and
	// should step down.
	Stale
)

func (r Result) String() string {
	switch r {
	case Accepted:
		return "accepted"
	case Duplicate:
		return "duplicate"
	case Stale:
		return "stale"
	}
	return "invalid"
}

// Errors. Use errors.Is.
var (
	// ErrCorruptRecord: a record in one of tabfence's stores is not what
	// tabfence wrote (wrong types, missing fields, out-of-range numbers):
	// a foreign script or an old build wrote there. Never a panic.
	ErrCorruptRecord = errors.New("idb: corrupt record")
	// ErrInvalidOp: an operation without a resource or ID, or with a token
	// outside 1..MaxToken.
	ErrInvalidOp = errors.New("idb: invalid operation")
	// ErrTokenExhausted: the resource's token reached MaxToken.
	ErrTokenExhausted = errors.New("idb: fencing tokens exhausted")
	// ErrInvalidSchema: schema steps not strictly increasing from 1.
	ErrInvalidSchema = errors.New("idb: invalid schema")
)

// CorruptError says which record was corrupt and why; it matches
// ErrCorruptRecord with errors.Is.
type CorruptError struct {
	Store, Key, Reason string
}

func (e *CorruptError) Error() string {
	return "idb: corrupt record in " + e.Store + " at key \"" + e.Key + "\": " + e.Reason
}

// Is makes errors.Is(err, ErrCorruptRecord) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorruptRecord }

// Op is one fenced operation offered to a receiver.
type Op struct {
	Resource string
	// Token is the sender's fencing token (leadership epoch), 1..MaxToken.
	Token uint64
	// OperationID identifies the operation across retries and leaders: the
	// same ID is applied at most once (within the remembered window).
	OperationID string
	// Sequence, when non-zero, is the operation's position in its sender's
	// stream under Token (1, 2, 3…). Under the current token a sequence at
	// or below the highest applied one is a duplicate even after its ID has
	// left the window. Zero means unsequenced: only the ID deduplicates.
	Sequence uint64
}

// Validate checks the operation's fields.
//
// One errors.Join call site for all four cases: in wasm each call site of
// a variadic call with its own error values costs over a kilobyte.
func (op Op) Validate() error {
	var why string
	switch {
	case op.Resource == "" || len(op.Resource) > MaxResourceLen:
		why = "resource must be 1..200 bytes" // MaxResourceLen
	case op.OperationID == "" || len(op.OperationID) > MaxOperationIDLen || hasControl(op.OperationID):
		why = "operation ID must be 1..255 bytes without control characters" // MaxOperationIDLen
	case op.Token == 0 || op.Token > MaxToken:
		why = "token must be in 1..2^53-1"
	case op.Sequence > MaxToken:
		why = "sequence must be <= 2^53-1"
	default:
		return nil
	}
	return errors.Join(ErrInvalidOp, errors.New(why))
}

// FenceRecord is a receiver's memory for one resource (store tf_fences).
//
// Its size is bounded: Recent keeps the last N applied operation IDs (N set
// by WithRecentOps, default 64) across tokens, and HighestSeq is kept only
// for the current token. That is enough because
//   - operations under any older token are rejected as stale by the token
//     comparison alone, so their sequences need not be remembered;
//   - under the current token, a sequenced sender's replay is caught by
//     HighestSeq however old it is;
//   - what the window is needed for is an unsequenced retry, or an
//     operation re-sent under a NEW token by the next leader (it retries
//     what the previous leader may have applied): those are deduplicated
//     for the last N operations. Callers that need exactly-once beyond that
//     keep an idempotency record in their own store, written in the same
//     transaction through WriteTx (reference section 16, "simpler
//     production option").
//
// A stored fence is therefore at most N x 256 bytes (16 KiB by default).
type FenceRecord struct {
	Resource   string
	Highest    uint64   // highest accepted token; 0 = none yet
	HighestSeq uint64   // highest sequence applied under Highest
	Recent     []string // IDs of the last applied operations, oldest first
}

func (r FenceRecord) seen(id string) bool {
	for _, a := range r.Recent {
		if a == id {
			return true
		}
	}
	return false
}

// Decide is the fence's decision, pure: given the stored record (the zero
// record when none exists), the resource's allocated epoch (the last token
// tf_epochs handed out, read in the same transaction; 0 when none) and an
// operation, it returns the result and the record to store when the result
// is Accepted. limit bounds Recent (<= 0 means DefaultRecentOps). op must be
// valid (see Op.Validate).
//
// Order of the checks, and why:
//  1. deposed (token below the highest accepted or the highest allocated)
//     -> Stale, even if the ID was applied before: the sender must learn it
//     lost leadership (section 20), and an old ID may have left the window
//     anyway, so answering by ID would be unreliable.
//  2. ID remembered -> Duplicate, whatever the token: a new leader retrying
//     what the old one applied must not apply it twice.
//  3. token == highest and 0 < seq <= highest seq -> Duplicate: that
//     position of the current leader's stream was already applied.
//  4. otherwise Accepted: a higher token resets the sequence.
func Decide(rec FenceRecord, allocated uint64, op Op, limit int) (Result, FenceRecord) {
	limit = recentLimit(limit)
	if Deposed(rec.Highest, allocated, op.Token) {
		return Stale, rec
	}
	if rec.seen(op.OperationID) {
		return Duplicate, rec
	}
	if op.Token == rec.Highest && op.Sequence != 0 && op.Sequence <= rec.HighestSeq {
		return Duplicate, rec
	}
	next := FenceRecord{Resource: op.Resource, Highest: op.Token}
	if op.Token == rec.Highest {
		next.HighestSeq = max(rec.HighestSeq, op.Sequence)
	} else {
		next.HighestSeq = op.Sequence
	}
	keep := rec.Recent
	if len(keep) >= limit {
		keep = keep[len(keep)-limit+1:]
	}
	next.Recent = make([]string, 0, len(keep)+1)
	next.Recent = append(next.Recent, keep...)
	next.Recent = append(next.Recent, op.OperationID)
	return Accepted, next
}

// Deposed is the fencing rule: token is from a deposed owner when it is
// below the highest token a fence accepted for the resource, or below the
// highest token allocated for it (allocated, from tf_epochs). The second
// half is what makes a steal effective at once: the thief's allocation
// deposes the old owner before the thief writes anything. A token ABOVE the
// allocated epoch is not refused: the allocator is not the only issuer (a
// server hands out tokens of its own), and the fence's own highest covers
// those.
func Deposed(highest, allocated, token uint64) bool {
	return token < highest || token < allocated
}

// recentLimit is the window of remembered operation IDs for a configured
// limit (<= 0 means DefaultRecentOps), capped at MaxRecentOps.
func recentLimit(limit int) int {
	if limit <= 0 {
		return DefaultRecentOps
	}
	return min(limit, MaxRecentOps)
}

// DecideCAS is CompareAndSwap's rule: a write under token is allowed when
// the token is valid and its owner is not deposed: not older than the
// highest one that wrote the key, nor than the highest allocated for the
// token's resource (allocated; 0 when the caller names none). An equal
// token may write again: the same leader updates its own value.
func DecideCAS(highest, allocated, token uint64) bool {
	return token != 0 && token <= MaxToken && !Deposed(highest, allocated, token)
}

// NextToken returns the token after current, or ErrTokenExhausted.
func NextToken(current uint64) (uint64, error) {
	if current >= MaxToken {
		return 0, ErrTokenExhausted
	}
	return current + 1, nil
}

// EpochRecord is the allocation state of one resource (store tf_epochs).
type EpochRecord struct {
	Resource  string
	Epoch     uint64 // last allocated token
	OwnerID   string // who allocated it
	UpdatedAt int64  // ms since the epoch, metadata only: never an authority
}

// Step is one schema upgrade: it runs when the database's version moves
// from below Version to Version or above.
type Step struct {
	Version uint64
	// Upgrade creates or changes the app's stores. It runs inside the
	// versionchange transaction on the event loop: issue requests, never
	// wait on anything (see UpgradeTx).
	Upgrade func(tx *UpgradeTx) error
}

// Schema is the app's part of the database: ordered upgrade steps. The
// database version is the last step's Version (1 with no steps). tabfence's
// own stores are created by whichever upgrade finds them missing.
type Schema struct {
	Steps []Step
}

// Version is the database version this schema opens.
func (s Schema) Version() uint64 {
	if len(s.Steps) == 0 {
		return 1
	}
	return s.Steps[len(s.Steps)-1].Version
}

// Validate checks that versions start at 1 or above and strictly increase,
// within what a JavaScript number holds.
func (s Schema) Validate() error {
	var prev uint64
	for i, st := range s.Steps {
		if st.Version <= prev || st.Version > MaxToken {
			return errors.Join(ErrInvalidSchema, errors.New("step "+strconv.Itoa(i)+": version "+
				strconv.FormatUint(st.Version, 10)+" must be greater than "+strconv.FormatUint(prev, 10)))
		}
		prev = st.Version
	}
	return nil
}

// stepsBetween returns the steps to run when upgrading from oldV to newV.
func (s Schema) stepsBetween(oldV, newV uint64) []Step {
	var out []Step
	for _, st := range s.Steps {
		if st.Version > oldV && st.Version <= newV {
			out = append(out, st)
		}
	}
	return out
}

// EventKind says what happened to a connection.
type EventKind int

const (
	// Blocked: our open (or delete) waits because another connection — a
	// tab of an old build that does not close on versionchange — holds the
	// database open. Informational: the open keeps waiting until its ctx ends.
	Blocked EventKind = iota + 1
	// Deleted: another tab deletes the database (newVersion null). The
	// connection has closed itself; a leader must give up leadership.
	Deleted
	// Upgraded: another tab opens a newer version. The connection has closed
	// itself; this build is outdated and should reload.
	Upgraded
	// ClosedByBrowser: the browser closed the connection (storage cleared,
	// disk error).
	ClosedByBrowser
)

func (k EventKind) String() string {
	switch k {
	case Blocked:
		return "blocked"
	case Deleted:
		return "deleted"
	case Upgraded:
		return "upgraded"
	case ClosedByBrowser:
		return "closed"
	}
	return "unknown"
}

// Event tells the app what happened to its database. For Upgraded and
// Blocked, NewVersion is the version being opened (0 for a delete).
type Event struct {
	Kind       EventKind
	Name       string
	OldVersion uint64
	NewVersion uint64
}

// Errors a closed connection reports.
var (
	ErrClosed   = errors.New("idb: database closed")
	ErrDeleted  = errors.New("idb: database deleted by another tab")
	ErrUpgraded = errors.New("idb: database upgraded by another tab")
)

// classifyVersionChange turns a versionchange event's newVersion (nil for
// null: a delete) into an event kind: the way a delete is told from an
// upgrade is that a delete has no target version.
func classifyVersionChange(newVersion *uint64) EventKind {
	if newVersion == nil {
		return Deleted
	}
	return Upgraded
}

func (k EventKind) closeErr() error {
	switch k {
	case Deleted:
		return ErrDeleted
	case Upgraded:
		return ErrUpgraded
	}
	return ErrClosed
}

// Names of tabfence's own stores. App stores must not start with "tf_".
const (
	StoreEpochs = "tf_epochs"
	StoreFences = "tf_fences"
)

// ErrReservedStore: an app tried to create or write a "tf_" store.
var ErrReservedStore = errors.New("idb: store names starting with tf_ are reserved")

func reserved(name string) bool { return len(name) >= 3 && name[:3] == "tf_" }

// StoreOptions describe an app object store.
type StoreOptions struct {
	KeyPath       string // "" = out-of-line keys
	AutoIncrement bool
}

// casResource is the tf_fences key CompareAndSwap uses for one store key.
// The NUL separators keep it apart from the resources applications name for
// Apply (wire.ValidResource allows no control characters).
func casResource(store, key string) string { return "cas\x00" + store + "\x00" + key }

// hasControl reports ASCII control characters. Operation IDs are stored
// newline-separated in one string (one read and one write per fence instead
// of one per remembered ID), and they end up in logs.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return true
		}
	}
	return false
}
