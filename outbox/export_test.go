package outbox

import "github.com/tabfence/tabfence/outbox/queue"

// Internals the external tests (package outbox_test) check directly. Those
// tests are external because they run on outbox/memstore, which imports this
// package: an internal test may not import it back.
var (
	MaxPendingAppends = maxPendingAppends
	FailureOf         = queue.FailureOf
	FenceFailureOf    = queue.FenceFailureOf
	Apply             = apply
)

// SetTestHookQueued sets the group commit's test hook (nil clears it).
func SetTestHookQueued(f func()) { testHookQueued = f }

// ConfigForTest is the Outbox's own Config, which a test may change before use.
func (o *Outbox) ConfigForTest() *Config { return &o.cfg }
