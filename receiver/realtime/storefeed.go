package realtime

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tabfence/tabfence/receiver"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// ChangeSchema is the DDL of the change rows and of each scope's head, one
// statement each, with blob the store's binary column type (BLOB for
// SQLite, BYTEA for PostgreSQL).
func ChangeSchema(blob string) []string {
	out := []string{
		`CREATE TABLE IF NOT EXISTS tabfence_changes (
	scope   TEXT   NOT NULL,
	version BIGINT NOT NULL,
	changes %BLOB% NOT NULL,
	created BIGINT NOT NULL,
	PRIMARY KEY (scope, version))`,
		`CREATE INDEX IF NOT EXISTS tabfence_changes_created ON tabfence_changes (created)`,
		`CREATE TABLE IF NOT EXISTS tabfence_change_heads (
	scope   TEXT   PRIMARY KEY,
	version BIGINT NOT NULL)`,
	}
	for i := range out {
		out[i] = strings.ReplaceAll(out[i], "%BLOB%", blob)
	}
	return out
}

// Defaults of StoreOptions.
const (
	DefaultChangeRetention = 24 * time.Hour
	DefaultReapEvery       = 10 * time.Minute
	DefaultPoll            = 10 * time.Second
)

// StoreOptions configure a StoreFeed; zero fields take their defaults.
type StoreOptions struct {
	// Blob is the binary column type for CreateChangeTables: "BLOB"
	// (default, SQLite) or "BYTEA" (PostgreSQL).
	Blob string
	// Keep is how many deltas per scope are kept for catch-up (default
	// DefaultKeep); Retention how long (default 24h). Rows past either are
	// reaped, and a client further behind than what is kept is told to
	// reset (reload a snapshot).
	Keep      int
	Retention time.Duration
	// ReapEvery is how often rows are reaped (default 10 minutes).
	ReapEvery time.Duration
	// Poll is how often the scopes with subscribers are read for rows this
	// instance was not told about (default 10s): a lost notification, or
	// another process writing the same store, costs at most this delay.
	Poll time.Duration
	// Notify, when set, runs in PublishTx after the row is written (pgfeed
	// sends its NOTIFY there, so it is delivered at commit).
	Notify func(ctx context.Context, tx receiver.Tx, scope string) error
	// Clock returns the current time (default time.Now).
	Clock func() time.Time
	// Logger receives read and reap errors (default slog.Default()).
	Logger *slog.Logger
}

func (o StoreOptions) withDefaults() StoreOptions {
	if o.Blob == "" {
		o.Blob = "BLOB"
	}
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	if o.Retention <= 0 {
		o.Retention = DefaultChangeRetention
	}
	if o.ReapEvery <= 0 {
		o.ReapEvery = DefaultReapEvery
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// StoreFeed is a TxFeed whose changes are rows of the receiver's store,
// written in the business write's transaction: a scope's head row is
// advanced there, so versions follow commit order, a change exists exactly
// when its write does, and versions survive a restart (a crash between the
// commit and the fan-out loses nothing: the rows are read at the next
// commit, poll or restart). After a commit the server calls Committed and
// the feed reads the new rows and hands them to this instance's
// subscribers. Close stops its reaper and poller.
type StoreFeed struct {
	store receiver.Store
	opts  StoreOptions
	log   *slog.Logger
	stop  context.CancelFunc
	done  chan struct{}

	mu     sync.Mutex
	scopes map[string]*local
}

// local is one scope's subscribers on this instance and the last version
// fanned out to them.
type local struct {
	version uint64
	subs    map[*storeSub]struct{}
}

type storeSub struct {
	ch    chan rt.Delta
	lost  chan struct{}
	after uint64 // the version its backlog reached
}

var _ TxFeed = (*StoreFeed)(nil)

// CreateChangeTables creates the change tables in store.
func CreateChangeTables(ctx context.Context, store receiver.Store, blob string) error {
	tx, err := store.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, ddl := range ChangeSchema(blob) {
		if _, err := tx.Exec(ctx, ddl); err != nil {
			return errors.Join(errors.New("realtime: create change tables"), err)
		}
	}
	return tx.Commit()
}

// OpenStoreFeed creates the change tables in store (see ChangeSchema) and
// starts the feed's reaper and poller.
func OpenStoreFeed(ctx context.Context, store receiver.Store, opts StoreOptions) (*StoreFeed, error) {
	opts = opts.withDefaults()
	if err := CreateChangeTables(ctx, store, opts.Blob); err != nil {
		return nil, err
	}
	return NewStoreFeed(store, opts), nil
}

// NewStoreFeed starts a feed on tables that exist already (a caller that
// creates them itself, e.g. under a lock shared by several instances).
func NewStoreFeed(store receiver.Store, opts StoreOptions) *StoreFeed {
	opts = opts.withDefaults()
	ctx, stop := context.WithCancel(context.Background())
	f := &StoreFeed{store: store, opts: opts, log: opts.Logger.With("component", "realtime-feed"), stop: stop,
		done: make(chan struct{}), scopes: map[string]*local{}}
	go f.background(ctx)
	return f
}

// Close stops the reaper and the poller; subscriptions stay open but get
// nothing more.
func (f *StoreFeed) Close() error {
	f.stop()
	<-f.done
	return nil
}

func (f *StoreFeed) background(ctx context.Context) {
	defer close(f.done)
	reap := time.NewTicker(f.opts.ReapEvery)
	defer reap.Stop()
	poll := time.NewTicker(f.opts.Poll)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			f.CatchUpAll(ctx)
		case <-reap.C:
			if n, err := f.Reap(ctx); err != nil {
				f.log.Error("reap change rows", "err", err)
			} else if n > 0 {
				f.log.Info("reaped change rows", "count", n)
			}
		}
	}
}

// PublishTx implements TxFeed: the scope's head row is advanced (the
// upsert locks it, so concurrent writers of one scope take versions in
// the order they commit) and the change row written, both in tx.
func (f *StoreFeed) PublishTx(ctx context.Context, tx receiver.Tx, scope string, changes []byte) error {
	_, err := f.publishTx(ctx, tx, scope, changes)
	return err
}

func (f *StoreFeed) publishTx(ctx context.Context, tx receiver.Tx, scope string, changes []byte) (uint64, error) {
	if err := checkChanges(changes); err != nil {
		return 0, err // the caller's transaction rolls back
	}
	var v int64
	err := tx.QueryRow(ctx, `INSERT INTO tabfence_change_heads (scope, version) VALUES ($1, 1)
		ON CONFLICT (scope) DO UPDATE SET version = tabfence_change_heads.version + 1 RETURNING version`, scope).Scan(&v)
	if err != nil {
		return 0, err
	}
	if changes == nil {
		changes = []byte{}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO tabfence_changes (scope, version, changes, created) VALUES ($1, $2, $3, $4)`,
		scope, v, changes, f.opts.Clock().UnixMilli()); err != nil {
		return 0, err
	}
	if f.opts.Notify != nil {
		if err := f.opts.Notify(ctx, tx, scope); err != nil {
			return 0, err
		}
	}
	return uint64(v), nil
}

// Committed implements TxFeed: the rows of scope committed since the last
// fan-out go to this instance's subscribers.
func (f *StoreFeed) Committed(ctx context.Context, scope string) { f.CatchUp(ctx, scope) }

// Publish implements Feed: PublishTx in a transaction of its own, then the
// fan-out.
func (f *StoreFeed) Publish(ctx context.Context, scope string, changes []byte) (rt.Delta, error) {
	tx, err := f.store.Begin(ctx)
	if err != nil {
		return rt.Delta{}, err
	}
	defer func() { _ = tx.Rollback() }()
	v, err := f.publishTx(ctx, tx, scope, changes)
	if err != nil {
		return rt.Delta{}, err
	}
	if err := tx.Commit(); err != nil {
		return rt.Delta{}, err
	}
	f.CatchUp(ctx, scope)
	return rt.Delta{Version: v, Prev: v - 1, Changes: changes}, nil
}

// Head returns scope's version (0 before its first change).
func (f *StoreFeed) Head(ctx context.Context, q receiver.Tx, scope string) (uint64, error) {
	var head int64
	err := q.QueryRow(ctx, `SELECT version FROM tabfence_change_heads WHERE scope = $1`, scope).Scan(&head)
	if err != nil && !errors.Is(err, receiver.ErrNoRows) {
		return 0, err
	}
	return uint64(head), nil
}

// Reap deletes the change rows no client can need: those more than Keep
// versions behind their scope's head, and those older than Retention. A
// client behind the oldest row left is told to reset.
func (f *StoreFeed) Reap(ctx context.Context) (int64, error) { return f.ReapKeeping(ctx, f.opts.Keep) }

// ReapKeeping is Reap keeping keep versions behind each head instead of
// Keep (0: every row; a client behind its head then resets), e.g. to
// reclaim space now or to test a client's reset.
func (f *StoreFeed) ReapKeeping(ctx context.Context, keep int) (int64, error) {
	tx, err := f.store.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	n, err := tx.Exec(ctx, `DELETE FROM tabfence_changes WHERE created < $1 OR version <=
		(SELECT h.version FROM tabfence_change_heads h WHERE h.scope = tabfence_changes.scope) - $2`,
		f.opts.Clock().Add(-f.opts.Retention).UnixMilli(), int64(max(keep, 0)))
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}
