// Package pgstore is the receiver.Store for several server instances sharing
// state: PostgreSQL through pgx.
//
// It keeps its own small connection pool (pgx.Conn is not safe for
// concurrent use and the module deliberately carries no pool dependency).
// Transactions run at READ COMMITTED: the receiver's statements are written
// as compare-and-set UPDATEs whose row locks serialize concurrent requests
// for the same key or resource.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tabfence/tabfence/receiver"
)

// DefaultMaxConns is the pool size when Open is given a maxConns of zero
// or less.
const DefaultMaxConns = 16

// Store is a receiver.Store over a PostgreSQL database.
type Store struct {
	p *pool
}

var _ receiver.Store = (*Store)(nil)

// Open connects to url (postgres://...; a search_path query parameter selects
// a schema) and creates the receiver's tables. maxConns <= 0 means
// DefaultMaxConns.
func Open(ctx context.Context, url string, maxConns int) (*Store, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("pgstore: parse url: %w", err)
	}
	if maxConns <= 0 {
		maxConns = DefaultMaxConns
	}
	s := &Store{p: newPool(cfg, maxConns)}
	c, err := s.p.acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	// Serialize schema creation across instances starting together.
	_, err = c.Exec(ctx, `SELECT pg_advisory_lock(7311)`)
	if err == nil {
		_, err = c.Exec(ctx, strings.ReplaceAll(receiver.SchemaCommon, "%BLOB%", "BYTEA"))
		_, uerr := c.Exec(ctx, `SELECT pg_advisory_unlock(7311)`)
		err = errors.Join(err, uerr)
	}
	s.p.release(c, err)
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("pgstore: create schema: %w", err)
	}
	return s, nil
}

// Begin starts a transaction on a pooled connection; Commit or Rollback
// returns the connection.
func (s *Store) Begin(ctx context.Context) (receiver.WriteTx, error) {
	c, err := s.p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := c.Begin(ctx)
	if err != nil {
		s.p.release(c, err)
		return nil, err
	}
	return &writeTx{q: q{tx}, tx: tx, c: c, p: s.p}, nil
}

// View runs fn on a pooled connection outside a transaction.
func (s *Store) View(ctx context.Context, fn func(receiver.Tx) error) error {
	c, err := s.p.acquire(ctx)
	if err != nil {
		return err
	}
	err = fn(q{c})
	s.p.release(c, err)
	return err
}

// Close closes all idle connections; connections in use close when returned.
func (s *Store) Close() error {
	s.p.close()
	return nil
}

// q adapts pgx.Tx and *pgx.Conn to receiver.Tx.
type q struct{ db pgxQuerier }

type pgxQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (q q) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if err := receiver.CheckArgs(args); err != nil {
		return 0, err
	}
	// Exec through Query keeps one code path for pgx.Tx and *pgx.Conn.
	rows, err := q.db.Query(ctx, query, args...)
	if err != nil {
		return 0, textError(err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, textError(err)
	}
	return rows.CommandTag().RowsAffected(), nil
}

func (q q) QueryRow(ctx context.Context, query string, args ...any) receiver.Row {
	if err := receiver.CheckArgs(args); err != nil {
		return errRow{err}
	}
	return row{q.db.QueryRow(ctx, query, args...)}
}

func (q q) Query(ctx context.Context, query string, args ...any) (receiver.Rows, error) {
	if err := receiver.CheckArgs(args); err != nil {
		return nil, err
	}
	r, err := q.db.Query(ctx, query, args...)
	if err != nil {
		return nil, textError(err)
	}
	return rows{r}, nil
}

// textError marks PostgreSQL's refusals of text it cannot hold (a NUL, or
// bytes that are not UTF-8, from a []byte sent to a TEXT column or made by
// SQL) with receiver.ErrInvalidText, so they are answered as client input.
func textError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "22021" || pe.Code == "22P05") {
		return fmt.Errorf("%w: %w", receiver.ErrInvalidText, err)
	}
	return err
}

type row struct{ r pgx.Row }

func (r row) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w (%w)", receiver.ErrNoRows, err)
	}
	return textError(err)
}

// errRow is a Row whose statement was refused before it ran.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type rows struct{ pgx.Rows }

func (r rows) Err() error { return textError(r.Rows.Err()) }

type writeTx struct {
	q
	tx   pgx.Tx
	c    *pgx.Conn
	p    *pool
	done bool
}

func (t *writeTx) Commit() error {
	if t.done {
		return pgx.ErrTxClosed
	}
	t.done = true
	err := t.tx.Commit(context.Background())
	t.p.release(t.c, err)
	return err
}

func (t *writeTx) Rollback() error {
	if t.done {
		return pgx.ErrTxClosed
	}
	t.done = true
	err := t.tx.Rollback(context.Background())
	t.p.release(t.c, err)
	return err
}
