package storetest_test

import (
	"testing"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/storetest"
)

// MemStore is the executable specification: it must pass its own suite.
func TestMemStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) outbox.Store { return outbox.NewMemStore() })
}
