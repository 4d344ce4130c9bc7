package realtime

import (
	"context"
	"errors"
	"sync"

	"github.com/tabfence/tabfence/receiver"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// Feed is the ordered change stream of each scope (a user's or tenant's
// replica). Versions grow by one per delta within a scope.
type Feed interface {
	// Subscribe registers for the deltas of scope after version from. The
	// subscription's Backlog holds those the feed still keeps, up to its
	// Version; live deltas follow on C. With Reset set the feed no longer
	// holds every delta after from (or from is ahead of it): the client
	// reloads a snapshot. At most buffer live deltas wait on C: past that
	// the feed drops the subscription and closes Lost.
	Subscribe(ctx context.Context, scope string, from uint64, buffer int) (*Subscription, error)
	// Publish appends changes to scope's stream as its next version.
	Publish(ctx context.Context, scope string, changes []byte) (rt.Delta, error)
}

// TxFeed is a Feed that can append a change inside the business write's
// transaction, so its version is assigned in commit order and the change
// exists exactly when the write does. The server uses it when its feed has
// it; otherwise it publishes after the commit.
type TxFeed interface {
	Feed
	// PublishTx appends changes to scope's stream inside tx.
	PublishTx(ctx context.Context, tx receiver.Tx, scope string, changes []byte) error
	// Committed tells the feed that a transaction that called PublishTx
	// for scope has committed: its subscribers here get the new deltas.
	Committed(ctx context.Context, scope string)
}

// Subscription is one connection's view of a scope's stream.
type Subscription struct {
	Backlog []rt.Delta
	Version uint64
	Reset   bool
	C       <-chan rt.Delta
	// Lost is closed when the subscriber fell more than its buffer behind;
	// nothing more arrives on C.
	Lost <-chan struct{}
	// Cancel ends the subscription; it is safe to call more than once.
	Cancel func()
}

// ErrFeedClosed is returned by a closed feed.
var ErrFeedClosed = errors.New("realtime: feed closed")

// MemFeed is an in-process Feed for tests and single-process servers that
// need no durable stream: it keeps the last Keep deltas of each scope in
// memory for clients that reconnect behind. Its versions restart at 0 with
// the process, so a client ahead of them is told to reset: a crash between
// a commit and its Publish loses that delta for live clients, and the
// reset after the restart repairs it. It numbers a delta when it is
// published, after the commit: the Server therefore holds a scope's
// mutations from the start of their transaction to their Publish, so
// versions follow commit order; changes published with Server.Publish are
// in the order of those calls. StoreFeed numbers in the transaction and
// survives restarts. The zero value is not usable: NewMemFeed.
type MemFeed struct {
	keep   int
	mu     sync.Mutex
	scopes map[string]*scopeLog
}

type scopeLog struct {
	version uint64
	recent  []rt.Delta // the last keep deltas, oldest first
	subs    map[*sub]struct{}
}

type sub struct {
	ch   chan rt.Delta
	lost chan struct{}
}

// DefaultKeep is how many deltas per scope a MemFeed keeps for catch-up.
const DefaultKeep = 1024

// NewMemFeed returns a feed keeping the last keep deltas per scope
// (DefaultKeep when keep <= 0).
func NewMemFeed(keep int) *MemFeed {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &MemFeed{keep: keep, scopes: map[string]*scopeLog{}}
}

func (f *MemFeed) log(scope string) *scopeLog {
	l := f.scopes[scope]
	if l == nil {
		l = &scopeLog{subs: map[*sub]struct{}{}}
		f.scopes[scope] = l
	}
	return l
}

// Subscribe implements Feed.
func (f *MemFeed) Subscribe(_ context.Context, scope string, from uint64, buffer int) (*Subscription, error) {
	if buffer < 1 {
		buffer = 1
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.log(scope)
	s := &sub{ch: make(chan rt.Delta, buffer), lost: make(chan struct{})}
	l.subs[s] = struct{}{}
	out := &Subscription{Version: l.version, C: s.ch, Lost: s.lost}
	oldest := l.version - uint64(len(l.recent)) // the Prev of the first kept delta
	switch {
	case from > l.version || from < oldest:
		out.Reset = true
	default:
		out.Backlog = append([]rt.Delta(nil), l.recent[len(l.recent)-int(l.version-from):]...)
	}
	var once sync.Once
	out.Cancel = func() {
		once.Do(func() {
			f.mu.Lock()
			delete(l.subs, s)
			f.mu.Unlock()
		})
	}
	return out, nil
}

// Publish implements Feed. Delivery never waits: a subscriber whose buffer
// is full is dropped (its Lost closed), so one slow connection cannot hold
// back the others or make the server buffer without limit.
func (f *MemFeed) Publish(_ context.Context, scope string, changes []byte) (rt.Delta, error) {
	if err := checkChanges(changes); err != nil {
		return rt.Delta{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.log(scope)
	d := rt.Delta{Version: l.version + 1, Prev: l.version, Changes: append([]byte(nil), changes...)}
	l.version = d.Version
	if len(l.recent) == f.keep {
		copy(l.recent, l.recent[1:])
		l.recent = l.recent[:f.keep-1]
	}
	l.recent = append(l.recent, d)
	for s := range l.subs {
		select {
		case s.ch <- d:
		default:
			delete(l.subs, s)
			close(s.lost)
		}
	}
	return d, nil
}
