package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

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
