package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/receiver/conformance"
	"github.com/tabfence/tabfence/receiver/pgstore"
	"github.com/tabfence/tabfence/receiver/pgstore/pgtest"
)

func TestConformance(t *testing.T) {
	pgtest.BaseURL(t) // skip or fail once, not per case
	conformance.Run(t, func(t *testing.T) conformance.Opener {
		url := pgtest.SchemaURL(t)
		return func(ctx context.Context) (receiver.Store, error) { return pgstore.Open(ctx, url, 0) }
	})
}

// A savepoint undoes what follows it: rolling back to it undoes a
// statement, a statement that fails after it is rolled back to it (the
// transaction usable again), and what follows commits.
func TestSavepoint(t *testing.T) {
	ctx := context.Background()
	st, err := pgstore.Open(ctx, pgtest.SchemaURL(t), 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	tx, err := st.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `CREATE TABLE sp (v TEXT PRIMARY KEY)`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())

	tx, err = st.Begin(ctx)
	require.NoError(t, err)
	exec := func(q string, args ...any) error { _, err := tx.Exec(ctx, q, args...); return err }
	require.NoError(t, exec(`SAVEPOINT s`))
	require.NoError(t, exec(`INSERT INTO sp (v) VALUES ($1)`, "undone"))
	require.NoError(t, exec(`ROLLBACK TO SAVEPOINT s`))
	require.NoError(t, exec(`INSERT INTO sp (v) VALUES ($1)`, "kept"))
	require.NoError(t, exec(`SAVEPOINT s`))
	require.Error(t, exec(`INSERT INTO sp (v) VALUES ($1)`, "kept"), "a duplicate key")
	require.NoError(t, exec(`ROLLBACK TO SAVEPOINT s`))
	require.NoError(t, exec(`SAVEPOINT s`))
	require.NoError(t, exec(`INSERT INTO sp (v) VALUES ($1)`, "after"))
	require.NoError(t, tx.Commit())
	var vs []string
	require.NoError(t, st.View(ctx, func(q receiver.Tx) error {
		rows, err := q.Query(ctx, `SELECT v FROM sp ORDER BY v`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				return err
			}
			vs = append(vs, v)
		}
		return rows.Err()
	}))
	require.Equal(t, []string{"after", "kept"}, vs)
}
