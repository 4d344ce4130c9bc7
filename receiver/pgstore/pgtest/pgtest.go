// Package pgtest gives tests a private PostgreSQL schema.
//
// Tests read the server from TABFENCE_PG_URL, which
// internal/testenv/with-postgres.sh exports. When it is unset the test is
// skipped, unless CI or TABFENCE_REQUIRE_PG is set: then it fails, so a CI
// run cannot pass by silently testing nothing.
package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver/pgstore"
)

// EnvURL is the environment variable holding the PostgreSQL base URL.
const EnvURL = "TABFENCE_PG_URL"

// BaseURL returns TABFENCE_PG_URL, or skips or fails t when it is unset.
func BaseURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u != "" {
		return u
	}
	msg := EnvURL + " is not set: run under `bash internal/testenv/with-postgres.sh go test ...` to test PostgreSQL"
	require.Equal(t, "", os.Getenv("CI"), msg+" (required because CI or TABFENCE_REQUIRE_PG is set)")
	require.Equal(t, "", os.Getenv("TABFENCE_REQUIRE_PG"), msg+" (required because CI or TABFENCE_REQUIRE_PG is set)")
	t.Skip(msg)
	return ""
}

// SchemaURL creates a fresh schema for t, dropped when t ends, and returns a
// URL that uses it.
func SchemaURL(t testing.TB) string {
	t.Helper()
	base := BaseURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, drop, err := pgstore.NewSchema(ctx, base, "t")
	require.NoError(t, err, "pgtest")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := drop(ctx); err != nil {
			t.Logf("pgtest: drop schema: %v", err)
		}
	})
	return u
}
