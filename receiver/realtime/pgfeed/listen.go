package pgfeed

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// listen keeps a LISTEN connection open until ctx ends; ready gets the
// first connection's outcome.
func (f *Feed) listen(ctx context.Context, ready chan<- error) {
	defer close(f.done)
	first := true
	for {
		err := f.listenOnce(ctx, func() {
			if first {
				first = false
				ready <- nil
			}
		})
		if first {
			ready <- err
			return
		}
		if ctx.Err() != nil {
			return
		}
		f.log.Error("listener lost; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(reconnectWait):
		}
	}
}

func (f *Feed) listenOnce(ctx context.Context, onReady func()) error {
	c, err := pgx.ConnectConfig(ctx, f.cfg)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close(context.Background()) }()
	if _, err := c.Exec(ctx, "LISTEN "+pgx.Identifier{f.opts.Channel}.Sanitize()); err != nil {
		return err
	}
	onReady()
	f.CatchUpAll(ctx) // what was committed while no listener was open
	for {
		n, err := c.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		f.CatchUp(ctx, n.Payload)
	}
}
