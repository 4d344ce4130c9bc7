// Package pgfeed is a realtime.Feed on PostgreSQL for several server
// instances sharing one database: a change is a row appended in the
// business write's transaction (so versions follow commit order, per
// scope), and a NOTIFY sent with it (delivered at commit) wakes every
// instance's listener, which reads the new rows and fans them out to its
// own connections. A listener that lost its connection reads what it
// missed when it is back.
package pgfeed

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// Schema is the DDL Open runs, one statement each: the change rows and
// each scope's head.
var Schema = []string{
	`CREATE TABLE IF NOT EXISTS tabfence_changes (
	scope   TEXT   NOT NULL,
	version BIGINT NOT NULL,
	changes BYTEA  NOT NULL,
	PRIMARY KEY (scope, version))`,
	`CREATE TABLE IF NOT EXISTS tabfence_change_heads (
	scope   TEXT   PRIMARY KEY,
	version BIGINT NOT NULL)`,
}

// Options configure a Feed; zero fields take their defaults.
type Options struct {
	// Channel is the NOTIFY channel (default "tabfence_changes"); instances
	// sharing a database and its changes use the same one.
	Channel string
	// Keep is how many deltas behind a client may catch up (default
	// realtime.DefaultKeep); further behind it is told to reset.
	Keep int
	// Logger receives the listener's errors (default slog.Default()).
	Logger *slog.Logger
}

// Feed is a realtime.TxFeed on PostgreSQL. Close stops its listener.
type Feed struct {
	store receiver.Store
	cfg   *pgx.ConnConfig
	opts  Options
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
	subs    map[*sub]struct{}
}

type sub struct {
	ch    chan rt.Delta
	lost  chan struct{}
	after uint64 // the version its backlog reached
}

var _ realtime.TxFeed = (*Feed)(nil)

// Open creates the tables through store (a pgstore on url) and starts the
// listener on a connection of its own to url.
func Open(ctx context.Context, store receiver.Store, url string, opts Options) (*Feed, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgfeed: parse url: %w", err)
	}
	if opts.Channel == "" {
		opts.Channel = "tabfence_changes"
	}
	if opts.Keep <= 0 {
		opts.Keep = realtime.DefaultKeep
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	tx, err := store.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7312)`); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	for _, ddl := range Schema {
		if _, err := tx.Exec(ctx, ddl); err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("pgfeed: create schema: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	lctx, stop := context.WithCancel(context.Background())
	f := &Feed{store: store, cfg: cfg, opts: opts, log: opts.Logger.With("component", "pgfeed"), stop: stop,
		done: make(chan struct{}), scopes: map[string]*local{}}
	ready := make(chan error, 1)
	go f.listen(lctx, ready)
	select {
	case err := <-ready:
		if err != nil {
			stop()
			<-f.done
			return nil, err
		}
	case <-ctx.Done():
		stop()
		<-f.done
		return nil, ctx.Err()
	}
	return f, nil
}

// Close stops the listener.
func (f *Feed) Close() error {
	f.stop()
	<-f.done
	return nil
}

// PublishTx implements realtime.TxFeed: the scope's head row is locked
// and advanced, so concurrent writers of one scope take versions in the
// order they commit.
func (f *Feed) PublishTx(ctx context.Context, tx receiver.Tx, scope string, changes []byte) error {
	var v int64
	err := tx.QueryRow(ctx, `INSERT INTO tabfence_change_heads (scope, version) VALUES ($1, 1)
		ON CONFLICT (scope) DO UPDATE SET version = tabfence_change_heads.version + 1 RETURNING version`, scope).Scan(&v)
	if err != nil {
		return err
	}
	if changes == nil {
		changes = []byte{}
	}
	if _, err := tx.Exec(ctx, `INSERT INTO tabfence_changes (scope, version, changes) VALUES ($1, $2, $3)`, scope, v, changes); err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `SELECT pg_notify($1, $2)`, f.opts.Channel, scope)
	return err
}

// Publish implements realtime.Feed: PublishTx in a transaction of its own.
func (f *Feed) Publish(ctx context.Context, scope string, changes []byte) (rt.Delta, error) {
	tx, err := f.store.Begin(ctx)
	if err != nil {
		return rt.Delta{}, err
	}
	defer func() { _ = tx.Rollback() }()
	if err := f.PublishTx(ctx, tx, scope, changes); err != nil {
		return rt.Delta{}, err
	}
	var v int64
	if err := tx.QueryRow(ctx, `SELECT version FROM tabfence_change_heads WHERE scope = $1`, scope).Scan(&v); err != nil {
		return rt.Delta{}, err
	}
	if err := tx.Commit(); err != nil {
		return rt.Delta{}, err
	}
	return rt.Delta{Version: uint64(v), Prev: uint64(v) - 1, Changes: changes}, nil
}

// wait between listener reconnects.
const reconnectWait = time.Second
