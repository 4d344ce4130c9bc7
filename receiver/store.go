package receiver

import (
	"context"
	"errors"
)

// ErrNoRows is returned (wrapped) by Row.Scan when a query selected nothing.
// Stores wrap their driver's own error too, so errors.Is works with either.
var ErrNoRows = errors.New("receiver: no rows")

// Tx is the database handle a business handler gets. Both stores provide it,
// so a handler written once runs on SQLite and on PostgreSQL.
//
// Placeholder rule: write $1, $2, ... in every query. PostgreSQL requires that
// form and SQLite accepts it. Stick to SQL both dialects share (INSERT ... ON
// CONFLICT ... DO UPDATE, RETURNING, CAST(... AS BIGINT)); store integers as
// int64 and text as string, and avoid NULLs in columns you scan.
type Tx interface {
	// Exec runs a statement and returns the number of rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// QueryRow runs a query expected to return at most one row.
	QueryRow(ctx context.Context, query string, args ...any) Row
	// Query runs a query returning rows; the caller must Close them.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Row is the result of QueryRow.
type Row interface {
	// Scan copies the row's columns into dest; with no row it returns an
	// error that errors.Is(err, ErrNoRows).
	Scan(dest ...any) error
}

// Rows is the result of Query.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// WriteTx is a read-write transaction a Store hands to the receiver.
type WriteTx interface {
	Tx
	Commit() error
	Rollback() error
}

// Store is the persistence a Receiver needs. Implementations create the
// receiver's tables (see the Schema* constants) when they open.
//
// Begin must serialize writers as the backend requires (SQLite: one writer at
// a time); View must not wait for writers, so that a duplicate of a request
// that is still running is answered at once instead of queueing behind it.
type Store interface {
	// Begin starts a read-write transaction.
	Begin(ctx context.Context) (WriteTx, error)
	// View runs fn with a handle for reads outside any write transaction.
	View(ctx context.Context, fn func(q Tx) error) error
	// Close releases the store's connections.
	Close() error
}

// Table names used by the receiver. Both stores create them.
const (
	TableIdempotency = "tabfence_idempotency"
	TableFences      = "tabfence_fences"
)

// SchemaCommon is the DDL both stores run, with %BLOB% replaced by their
// binary column type (BLOB or BYTEA).
const SchemaCommon = `
CREATE TABLE IF NOT EXISTS tabfence_idempotency (
	scope         TEXT    NOT NULL,
	idem_key      TEXT    NOT NULL,
	fingerprint   TEXT    NOT NULL,
	state         BIGINT  NOT NULL,
	claim         TEXT    NOT NULL,
	claim_expires BIGINT  NOT NULL,
	status        BIGINT  NOT NULL,
	header        TEXT    NOT NULL,
	body          %BLOB%  NOT NULL,
	created       BIGINT  NOT NULL,
	expires       BIGINT  NOT NULL,
	PRIMARY KEY (scope, idem_key)
);
CREATE INDEX IF NOT EXISTS tabfence_idempotency_expires ON tabfence_idempotency (expires);
CREATE TABLE IF NOT EXISTS tabfence_fences (
	scope            TEXT   NOT NULL,
	resource         TEXT   NOT NULL,
	issued           BIGINT NOT NULL,
	highest_accepted BIGINT NOT NULL,
	updated          BIGINT NOT NULL,
	PRIMARY KEY (scope, resource)
);
`
