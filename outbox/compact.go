package outbox

import (
	"context"
	"time"
)

// DefaultAckedRetention is how long an acked record (and the response kept
// with it) stays readable before Compact removes it.
const DefaultAckedRetention = time.Hour

// Compact deletes acked records acknowledged more than retention ago
// (DefaultAckedRetention when retention <= 0) and returns how many.
//
// Without it the queue would only grow: every acked record would stay in
// IndexedDB forever, and Status, which reads the records to count them,
// would get slower with every mutation ever sent. Only acked records go:
// pending, failed, conflict and dead-letter records are the user's work and
// stay until they are sent or the app discards them. The flush owner calls
// it after a flush; any tab may.
func (o *Outbox) Compact(ctx context.Context, retention time.Duration) (int, error) {
	if retention <= 0 {
		retention = DefaultAckedRetention
	}
	return o.cfg.Store.Delete(ctx, Filter{AckedBefore: o.cfg.Clock.Now().Add(-retention)})
}
