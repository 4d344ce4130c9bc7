package pgstore_test

import (
	"context"
	"testing"

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
