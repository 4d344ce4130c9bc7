package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
)

// NewSchema creates a fresh, uniquely named schema in the database at base
// and returns a URL whose connections use it (search_path), plus a function
// that drops it. Tests and benchmarks use it to run in parallel on one
// server without seeing each other's rows.
func NewSchema(ctx context.Context, base, prefix string) (schemaURL string, drop func(context.Context) error, err error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("pgstore: parse url: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + "_" + hex.EncodeToString(b[:])
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, fmt.Errorf("pgstore: connect: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("pgstore: create schema: %w", err)
	}
	qv := u.Query()
	qv.Set("search_path", name)
	u.RawQuery = qv.Encode()
	drop = func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		return err
	}
	return u.String(), drop, nil
}
