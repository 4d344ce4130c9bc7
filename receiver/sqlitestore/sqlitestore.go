// Package sqlitestore is the embedded receiver.Store: SQLite through the
// pure-Go modernc.org/sqlite driver, in WAL mode.
//
// SQLite allows one writer at a time. Rather than let concurrent requests
// collide on SQLITE_BUSY, all writes go through a single connection (the
// database/sql pool queues them, honouring each request's context), with
// BEGIN IMMEDIATE so a transaction holds the write lock from its start.
// Reads use a separate pool of read-only connections, which WAL lets run
// alongside the writer: a duplicate of a running request is answered from
// there at once instead of queueing behind it. The writer keeps its
// temporary files in memory: a batch's savepoints journal the pages each
// mutation touches, past 64 KiB SQLite would write that journal to a file.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"modernc.org/sqlite"

	"github.com/tabfence/tabfence/receiver"
)

// Store is a receiver.Store over one SQLite file.
type Store struct {
	w, r *sql.DB
}

var _ receiver.Store = (*Store)(nil)

func dsn(path string, readOnly bool) string {
	q := "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	if readOnly {
		q += "&_pragma=query_only(1)"
	} else {
		q += "&_txlock=immediate&_pragma=temp_store(memory)"
	}
	return "file:" + path + "?" + q
}

// Open opens (creating if needed) the SQLite database at path and the
// receiver's tables in it. The directory is created too.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlitestore: bad path %q", path)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("sqlitestore: %w", err)
		}
	}
	drv := &sqlite.Driver{}
	w := sql.OpenDB(connector{dsn(path, false), drv})
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if _, err := w.ExecContext(ctx, strings.ReplaceAll(receiver.SchemaCommon, "%BLOB%", "BLOB")); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlitestore: create schema: %w", err)
	}
	r := sql.OpenDB(connector{dsn(path, true), drv})
	r.SetMaxOpenConns(8)
	r.SetMaxIdleConns(8)
	return &Store{w: w, r: r}, nil
}

// Begin starts a write transaction (BEGIN IMMEDIATE on the one writer).
func (s *Store) Begin(ctx context.Context) (receiver.WriteTx, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return writeTx{q: q{tx}, tx: tx}, nil
}

// View runs fn on the read-only pool.
func (s *Store) View(ctx context.Context, fn func(receiver.Tx) error) error {
	return fn(q{s.r})
}

// Close closes both pools.
func (s *Store) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

type sqlQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// q adapts *sql.Tx and *sql.DB to receiver.Tx. SQLite could store a NUL in
// TEXT, PostgreSQL cannot: both stores refuse such text (receiver.CheckArgs)
// so that a handler behaves the same on either.
type q struct{ db sqlQuerier }

func (q q) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if err := receiver.CheckArgs(args); err != nil {
		return 0, err
	}
	res, err := q.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q q) QueryRow(ctx context.Context, query string, args ...any) receiver.Row {
	if err := receiver.CheckArgs(args); err != nil {
		return errRow{err}
	}
	return row{q.db.QueryRowContext(ctx, query, args...)}
}

func (q q) Query(ctx context.Context, query string, args ...any) (receiver.Rows, error) {
	if err := receiver.CheckArgs(args); err != nil {
		return nil, err
	}
	r, err := q.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return rows{r}, nil
}

type row struct{ r *sql.Row }

func (r row) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w (%w)", receiver.ErrNoRows, err)
	}
	return err
}

// errRow is a Row whose statement was refused before it ran.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type rows struct{ *sql.Rows }

func (r rows) Close() { _ = r.Rows.Close() }

type writeTx struct {
	q
	tx *sql.Tx
}

func (t writeTx) Commit() error   { return t.tx.Commit() }
func (t writeTx) Rollback() error { return t.tx.Rollback() }
