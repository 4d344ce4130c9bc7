package sqlitestore

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"

	"modernc.org/sqlite"
)

// maxStmts bounds each connection's statement cache: a program that puts
// values into its SQL text gets no more prepared statements than this,
// the rest are prepared per use as before.
const maxStmts = 256

// connector opens driver connections that keep their prepared statements.
// Parsing the SQL is most of a short statement's cost in SQLite (a third
// of a batch's CPU time, measured with BenchmarkBatch100), and the
// receiver runs the same few statements again and again.
type connector struct {
	dsn string
	drv *sqlite.Driver
}

func (c connector) Connect(context.Context) (driver.Conn, error) {
	inner, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return &cachingConn{Conn: inner, stmts: map[string]*cachedStmt{}}, nil
}

func (c connector) Driver() driver.Driver { return c.drv }

// cachingConn answers every single statement through a prepared one it
// keeps by text. database/sql uses one connection from one goroutine at a
// time; a statement still in use (its rows open) is not handed out twice.
type cachingConn struct {
	driver.Conn
	stmts map[string]*cachedStmt
}

type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.SessionResetter
	driver.Validator
}

func (c *cachingConn) inner() innerConn { return c.Conn.(innerConn) }

// ExecContext and QueryContext send database/sql to PrepareContext (by
// driver.ErrSkip), except for text that may hold several statements.
func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if !cacheable(query) {
		return c.inner().ExecContext(ctx, query, args)
	}
	return nil, driver.ErrSkip
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if !cacheable(query) {
		return c.inner().QueryContext(ctx, query, args)
	}
	return nil, driver.ErrSkip
}

func (c *cachingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if st, ok := c.stmts[query]; ok && !st.busy {
		st.busy = true
		return st, nil
	}
	ds, err := c.inner().PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if _, taken := c.stmts[query]; taken || len(c.stmts) >= maxStmts || !cacheable(query) {
		return ds, nil
	}
	st := &cachedStmt{Stmt: ds, busy: true}
	c.stmts[query] = st
	return st, nil
}

func (c *cachingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *cachingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.inner().BeginTx(ctx, opts)
}

func (c *cachingConn) ResetSession(ctx context.Context) error { return c.inner().ResetSession(ctx) }
func (c *cachingConn) IsValid() bool                          { return c.inner().IsValid() }

func (c *cachingConn) Close() error {
	var errs []error
	for _, st := range c.stmts {
		errs = append(errs, st.Stmt.Close())
	}
	c.stmts = nil
	return errors.Join(append(errs, c.Conn.Close())...)
}

// cacheable reports whether query is surely one statement worth keeping:
// text with a ';' may be a script, and a savepoint statement (a batch names
// one per place in its transaction) costs next to nothing to parse and
// would take cache slots from the statements that do.
func cacheable(query string) bool {
	if strings.HasPrefix(query, "SAVEPOINT ") || strings.HasPrefix(query, "RELEASE ") || strings.HasPrefix(query, "ROLLBACK TO ") {
		return false
	}
	for i := 0; i < len(query); i++ {
		if query[i] == ';' {
			return false
		}
	}
	return true
}

// cachedStmt is a kept statement: database/sql's Close hands it back.
type cachedStmt struct {
	driver.Stmt
	busy bool
}

func (s *cachedStmt) Close() error {
	s.busy = false
	return nil
}

func (s *cachedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.Stmt.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (s *cachedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.Stmt.(driver.StmtQueryContext).QueryContext(ctx, args)
}
