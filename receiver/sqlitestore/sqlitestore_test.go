package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/conformance"
	"github.com/tabfence/tabfence/receiver/sqlitestore"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, func(t *testing.T) conformance.Opener {
		path := filepath.Join(t.TempDir(), "receiver.db")
		return func(ctx context.Context) (receiver.Store, error) { return sqlitestore.Open(ctx, path) }
	})
}

// Statements are kept prepared per connection; one still in use (its rows
// open) is not handed out again, and a schema change re-prepares.
func TestKeptStatements(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	tx, err := st.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `CREATE TABLE t (k BIGINT NOT NULL)`)
	require.NoError(t, err)
	for i := int64(1); i <= 3; i++ {
		_, err = tx.Exec(ctx, `INSERT INTO t (k) VALUES ($1)`, i)
		require.NoError(t, err)
	}
	const q = `SELECT k FROM t WHERE k >= $1 ORDER BY k`
	rows, err := tx.Query(ctx, q, int64(1))
	require.NoError(t, err)
	var outer, inner []int64
	for rows.Next() {
		var k, j int64
		require.NoError(t, rows.Scan(&k))
		outer = append(outer, k)
		require.NoError(t, tx.QueryRow(ctx, q, k).Scan(&j), "the same text while its rows are open")
		inner = append(inner, j)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.Equal(t, []int64{1, 2, 3}, outer)
	require.Equal(t, []int64{1, 2, 3}, inner)
	_, err = tx.Exec(ctx, `DROP TABLE t`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `CREATE TABLE t (x TEXT NOT NULL, k BIGINT NOT NULL)`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO t (x, k) VALUES ('a', 7)`)
	require.NoError(t, err)
	var k int64
	require.NoError(t, tx.QueryRow(ctx, q, int64(0)).Scan(&k), "re-prepared after the schema changed")
	require.Equal(t, int64(7), k)
	require.NoError(t, tx.Commit())
}

// The writer keeps its temporary files in memory: a batch's savepoint
// journal grows past SQLite's 64 KiB spill size and would otherwise be
// written to a temporary file page by page.
func TestWriterTempStoreInMemory(t *testing.T) {
	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "t.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	tx, err := st.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	var mode int64
	require.NoError(t, tx.QueryRow(ctx, `PRAGMA temp_store`).Scan(&mode))
	require.Equal(t, int64(2), mode, "temp_store MEMORY")
}
