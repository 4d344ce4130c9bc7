// Package pgfeed is a realtime.Feed on PostgreSQL for several server
// instances sharing one database: a realtime.StoreFeed (a change is a row
// appended in the business write's transaction, so versions follow commit
// order, per scope) whose PublishTx also sends a NOTIFY, delivered at
// commit, that wakes every instance's listener; the listener reads the new
// rows and fans them out to its own connections. A listener that lost its
// connection reads what it missed when it is back.
package pgfeed

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/realtime"
)

// Schema is the DDL Open runs, one statement each: the change rows and
// each scope's head.
var Schema = realtime.ChangeSchema("BYTEA")

// Options configure a Feed; zero fields take their defaults.
type Options struct {
	// Channel is the NOTIFY channel (default "tabfence_changes"); instances
	// sharing a database and its changes use the same one.
	Channel string
	// Keep is how many deltas behind a client may catch up (default
	// realtime.DefaultKeep), Retention for how long (default 24h); further
	// behind it is told to reset. Older rows are reaped every ReapEvery.
	Keep      int
	Retention time.Duration
	ReapEvery time.Duration
	// Clock returns the current time (default time.Now).
	Clock func() time.Time
	// Logger receives the listener's errors (default slog.Default()).
	Logger *slog.Logger
}

// Feed is a realtime.TxFeed on PostgreSQL. Close stops its listener.
type Feed struct {
	*realtime.StoreFeed
	cfg  *pgx.ConnConfig
	opts Options
	log  *slog.Logger
	stop context.CancelFunc
	done chan struct{}
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
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := createSchema(ctx, store); err != nil {
		return nil, err
	}
	channel := opts.Channel
	sf := realtime.NewStoreFeed(store, realtime.StoreOptions{Blob: "BYTEA", Keep: opts.Keep, Retention: opts.Retention,
		ReapEvery: opts.ReapEvery, Clock: opts.Clock, Logger: opts.Logger,
		Notify: func(ctx context.Context, tx receiver.Tx, scope string) error {
			_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, scope)
			return err
		}})
	lctx, stop := context.WithCancel(context.Background())
	f := &Feed{StoreFeed: sf, cfg: cfg, opts: opts, log: opts.Logger.With("component", "pgfeed"), stop: stop,
		done: make(chan struct{})}
	ready := make(chan error, 1)
	go f.listen(lctx, ready)
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		stop()
		<-f.done
		_ = sf.Close()
		return nil, err
	}
	return f, nil
}

// createSchema runs Schema under an advisory lock: instances starting
// together would otherwise race on CREATE TABLE IF NOT EXISTS.
func createSchema(ctx context.Context, store receiver.Store) error {
	tx, err := store.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7312)`); err != nil {
		return err
	}
	for _, ddl := range Schema {
		if _, err := tx.Exec(ctx, ddl); err != nil {
			return fmt.Errorf("pgfeed: create schema: %w", err)
		}
	}
	return tx.Commit()
}

// Close stops the listener, the reaper and the poller.
func (f *Feed) Close() error {
	f.stop()
	<-f.done
	return f.StoreFeed.Close()
}

// wait between listener reconnects.
const reconnectWait = time.Second
