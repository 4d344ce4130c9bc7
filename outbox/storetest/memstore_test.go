package storetest_test

import (
	"testing"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/memstore"
	"github.com/tabfence/tabfence/outbox/storetest"
)

// memstore.Store is the executable specification: it must pass its own suite.
func TestMemStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) outbox.Store { return memstore.New() })
}
