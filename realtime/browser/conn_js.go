//go:build js && wasm

package browser

import (
	"context"
	"syscall/js"

	rt "github.com/tabfence/tabfence/wire/realtime"
)

// Conn is one tab's handle on the browser's realtime connection.
type Conn struct {
	cfg Config
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
	return nil, ErrConfig // skeleton: to be built
}

// Names are the lock, channel and database names of c.
func (c *Conn) Names() Names { return Names{} }

// Status is this tab's view of the connection.
func (c *Conn) Status() Status { return Status{} }

// OnStatus calls fn when the status changes (a hidden tab: at most every
// Config.HiddenNotify). It returns the function that unsubscribes.
func (c *Conn) OnStatus(fn func(Status)) (unsubscribe func()) { return func() {} }

// OnDelta calls fn with every delta, in version order, once the replica
// holds it (Changes is the JSON change list, see the package doc).
func (c *Conn) OnDelta(fn func(d rt.Delta)) (unsubscribe func()) { return func() {} }

// OnReload calls fn when this tab missed deltas, or the server reset the
// replica: reread the replica (Read), which holds at least version.
func (c *Conn) OnReload(fn func(version uint64)) (unsubscribe func()) { return func() {} }

// OnPending calls fn with the pending mutations (of every tab) when they
// change.
func (c *Conn) OnPending(fn func([]PendingMutation)) (unsubscribe func()) { return func() {} }

// Mutate stores m in the pending store, shows it in every tab and waits for
// its ack, sent by whichever tab leads (now or after a failover). A reject
// is a *RejectError.
func (c *Conn) Mutate(ctx context.Context, m Mutation) (rt.Ack, error) { return rt.Ack{}, ErrClosed }

// Pending lists the pending mutations, oldest first.
func (c *Conn) Pending(ctx context.Context) ([]PendingMutation, error) { return nil, ErrClosed }

// Read returns the records of one replica store.
func (c *Conn) Read(ctx context.Context, store string) ([]Record, error) { return nil, ErrClosed }

// Retry asks the leader for its status; an unauthorized leader then tries
// to connect again (the person may have signed in again in this tab).
func (c *Conn) Retry() {}

// SetOffline is the app's "work offline" switch, for the whole browser:
// while on, the leader (this tab's or another's, now or after a failover)
// closes its socket and does not dial; mutations wait in the pending store.
// Off: the leader dials at once.
func (c *Conn) SetOffline(ctx context.Context, offline bool) error { return ErrClosed }

// SignOut deletes the replica's database: every tab's connection closes
// (ClosedDeleted) and the leader releases its lock.
func (c *Conn) SignOut(ctx context.Context) error { return ErrClosed }

// Close leaves the connection (a leader releases its lock; the next tab
// leads and connects).
func (c *Conn) Close(ctx context.Context) error { return nil }
