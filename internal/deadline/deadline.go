// Package deadline is context.WithTimeout without context's timerCtx.
//
// Why: the wasm runtime's download has a budget, and context.WithTimeout
// links timerCtx, whose String method reaches time.Time's formatting, which
// nothing else there needs (docs/build-notes.md has the figure). This
// context ends the same way, with the same errors:
//
//   - when the timeout passes, Err is context.DeadlineExceeded (and Cause
//     too);
//   - when its cancel function is called, Err is context.Canceled;
//   - when the parent ends first, Err and Cause are the parent's;
//   - Deadline is the earlier of the parent's and its own.
//
// One difference: a context derived from it (context.WithCancel(ctx))
// reports context.Canceled with cause context.DeadlineExceeded when the
// timeout passes, where one derived from a timerCtx reports
// DeadlineExceeded. Use it where that does not matter. The deadline is
// kept as Unix nanoseconds, not a time.Time: a struct holding a time.Time
// that is used as an interface keeps Time.String linked, which is what
// this package avoids.
package deadline

import (
	"context"
	"time"
)

type timeoutCtx struct {
	context.Context // context.WithCancelCause(parent)
	at              int64
}

// WithTimeout returns a copy of parent that ends after d (at once when d <=
// 0), and a function that ends it sooner and releases its timer; call it
// when done, as with context.WithTimeout.
func WithTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(parent)
	ctx := &timeoutCtx{Context: c, at: time.Now().Add(d).UnixNano()}
	if d <= 0 {
		cancel(context.DeadlineExceeded)
		return ctx, func() {}
	}
	t := time.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		t.Stop()
		cancel(nil)
	}
}

// Deadline reports the earlier of the parent's deadline and this one.
func (c *timeoutCtx) Deadline() (time.Time, bool) {
	if p, ok := c.Context.Deadline(); ok && p.UnixNano() < c.at {
		return p, true
	}
	return time.Unix(0, c.at), true
}

// Err is context.DeadlineExceeded once the timeout has ended the context.
func (c *timeoutCtx) Err() error {
	err := c.Context.Err()
	if err == context.Canceled && context.Cause(c.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}
