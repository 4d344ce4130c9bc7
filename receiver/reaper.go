package receiver

import (
	"context"
	"time"
)

// Reap deletes idempotency records whose retention has passed, and returns
// how many it deleted. After that a retry with one of their keys runs the
// handler again (the receiver already treats an expired record as absent,
// so reaping only reclaims space). Fences are never reaped: tokens must not
// be reused.
func (rc *Receiver) Reap(ctx context.Context) (int64, error) {
	return rc.exec(ctx, `DELETE FROM tabfence_idempotency WHERE expires <= $1`, rc.now().UnixMilli())
}

// StartReaper runs Reap every interval until ctx is done. Errors are logged
// and retried at the next tick.
func (rc *Receiver) StartReaper(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 10 * time.Minute
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				n, err := rc.Reap(ctx)
				if err != nil {
					rc.log.Error("reap idempotency records", "err", err)
				} else if n > 0 {
					rc.log.Info("reaped idempotency records", "count", n)
				}
			}
		}
	}()
}
