package browser

import (
	"context"
	"errors"
	"time"

	"github.com/tabfence/tabfence/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// Config configures a connection (Open).
type Config struct {
	// Scope is what the tabs share, e.g. a workspace id; with Protocol it
	// names the lock, the channel and the database (Names).
	Scope string
	// Protocol (default 1) separates builds that cannot share a replica.
	Protocol int
	// URL returns the WebSocket URL (ws: or wss:, or a path resolved
	// against the page) at each dial: a function, so an app can fetch a
	// short-lived ticket for it. It gets the dial's context (it ends with
	// the dial's timeout or the leadership): return when it ends. Browsers
	// send cookies with the upgrade but no custom header.
	URL func(ctx context.Context) (string, error)
	// Stores are the replica's object stores (out-of-line string keys);
	// SchemaVersion is their schema's version (default 1): a newer build
	// with a higher one upgrades the database, which every older tab's
	// connection hears and closes for (ClosedUpgraded), told apart from a
	// delete (ClosedDeleted).
	Stores        []string
	SchemaVersion int
	// User is the user the replica belongs to (sent in Hello; the server
	// closes a connection whose credentials are another user's).
	User string
	// FencePath, when set, is where the leader gets a server fencing token
	// for its mutations (POST FencePath+resource, the resource URL-encoded
	// and per browser, see ServerResource; the answer is {"token":N}),
	// once per term, before it first dials: a
	// later leader's token makes a deposed one's mutations stale at the
	// server. Without it mutations are unfenced (the server still applies
	// an id once).
	FencePath string
	// Leader tunes liveness and backoff (PingEvery, PongTimeout, Backoff).
	Leader realtime.Config
	// StallAfter turns on the watchdog (see locks.Config.StallAfter): a
	// follower steals from a frozen leader; fencing makes it harmless.
	StallAfter time.Duration
	// Snapshot, when set, is where the leader fetches the whole replica
	// when the server resets it (GET, with the page's cookies; it answers
	// {"version":N,"changes":[...]}). Without it a reset empties the
	// replica stores and the next deltas refill what they touch.
	Snapshot string
	// HiddenNotify is how often a hidden tab tells its listeners (default
	// 1 s; a visible tab tells them at once). A timer, not
	// requestAnimationFrame, which a hidden tab never runs.
	HiddenNotify time.Duration
}

// Names are the browser names a connection uses.
type Names struct {
	Lock     string // the Web Lock, also the BroadcastChannel: "tabfence:rt-<scope>:v<protocol>"
	Database string // the IndexedDB database of the replica and the pending store
	Resource string // the fenced resource in that database
}

// State is the connection state every tab shows.
type State string

const (
	StateConnecting   State = "connecting"
	StateReady        State = "ready"
	StateUnauthorized State = "unauthorized"
	StateOffline      State = "offline"
	StateOutdated     State = "outdated" // the server does not speak this build's protocol: reload a newer one
	StateClosed       State = "closed"
)

// Closed says why a connection ended.
type Closed string

const (
	ClosedNot      Closed = ""
	ClosedByApp    Closed = "closed"   // Close was called
	ClosedDeleted  Closed = "deleted"  // another tab deleted the database (a sign-out)
	ClosedUpgraded Closed = "upgraded" // a newer build upgraded the database: reload
	// ClosedStorage: the browser closed the database (site data cleared,
	// a disk error); no tab signed out. Reopening may work.
	ClosedStorage Closed = "storage-closed"
)

// Status is what every tab renders. The leader's fields (State, Token,
// Pending) reach followers on the channel; Version is this tab's own.
type Status struct {
	Leader        bool
	State         State
	Version       uint64        // the replica version this tab holds
	Pending       int           // mutations not yet settled
	OldestPending time.Duration // age of the oldest one
	Token         uint64        // the leader's fencing token
	LeaderID      string
	ID            string // this tab's id
	LastError     string // the connection's last error, in words; "" once ready
	Offline       bool   // the browser-wide "work offline" switch (SetOffline, in any tab)
	Closed        Closed
}

// Mutation is what an app asks for: the leader sends it as
// rt.Mutation{ID, Op, Entity, Payload}. ID defaults to a random id; it is
// the idempotency key. Entity defaults to Op.
type Mutation struct {
	ID      string
	Op      string
	Entity  string
	Payload []byte
}

// Errors. Use errors.Is.
var (
	ErrConfig   = errors.New("realtime/browser: invalid config")
	ErrClosed   = errors.New("realtime/browser: connection closed")
	ErrRejected = errors.New("realtime/browser: mutation rejected")
	ErrChanges  = errors.New("realtime/browser: malformed changes")
	ErrInvalid  = errors.New("realtime/browser: invalid mutation")
	// ErrOutcomeMissed: the mutation was settled (no longer pending), but
	// this tab missed the leader's answer; the replica shows its effect.
	ErrOutcomeMissed = errors.New("realtime/browser: mutation settled, its answer missed")
	// ErrNotStored: the pending store's write failed (twice: the page froze
	// mid-transaction and stayed frozen, storage closed): nothing was
	// stored, listed or sent; the mutation may be made again.
	ErrNotStored = errors.New("realtime/browser: mutation not stored, nothing was saved")
)

// PendingMutation is a mutation not yet settled, as every tab lists it.
type PendingMutation struct {
	Mutation
	MadeAt time.Time
}

// RejectError is a mutation's reject: the server refused it (Problem).
// It matches ErrRejected.
type RejectError struct {
	ID      string
	Problem rt.Problem
}

func (e *RejectError) Error() string {
	return "realtime/browser: mutation " + e.ID + " rejected: " + e.Problem.Type
}

// Is makes errors.Is(err, ErrRejected) true.
func (e *RejectError) Is(target error) bool { return target == ErrRejected }
