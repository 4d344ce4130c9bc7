package deadline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/internal/deadline"
)

func TestTimeoutEndsWithDeadlineExceeded(t *testing.T) {
	ctx, cancel := deadline.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	if ctx.Err() != context.DeadlineExceeded || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v", ctx.Err())
	}
	if c := context.Cause(ctx); c != context.DeadlineExceeded {
		t.Fatalf("Cause = %v", c)
	}
	cancel() // after the timeout: changes nothing
	if ctx.Err() != context.DeadlineExceeded {
		t.Fatalf("Err after cancel = %v", ctx.Err())
	}
}

func TestCancelEndsWithCanceled(t *testing.T) {
	ctx, cancel := deadline.WithTimeout(context.Background(), time.Hour)
	require.NoError(t, ctx.Err())
	cancel()
	<-ctx.Done()
	if ctx.Err() != context.Canceled || context.Cause(ctx) != context.Canceled {
		t.Fatalf("Err = %v, Cause = %v", ctx.Err(), context.Cause(ctx))
	}
}

func TestParentEndsFirst(t *testing.T) {
	boom := errors.New("boom")
	parent, stop := context.WithCancelCause(context.Background())
	ctx, cancel := deadline.WithTimeout(parent, time.Hour)
	defer cancel()
	stop(boom)
	<-ctx.Done()
	if ctx.Err() != context.Canceled || context.Cause(ctx) != boom {
		t.Fatalf("Err = %v, Cause = %v", ctx.Err(), context.Cause(ctx))
	}

	real, stopReal := context.WithTimeout(context.Background(), time.Millisecond)
	defer stopReal()
	ctx, cancel = deadline.WithTimeout(real, time.Hour)
	defer cancel()
	<-ctx.Done()
	if ctx.Err() != context.DeadlineExceeded {
		t.Fatalf("parent's deadline: Err = %v", ctx.Err())
	}
}

func TestNonPositiveTimeoutEndsAtOnce(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		ctx, cancel := deadline.WithTimeout(context.Background(), d)
		if ctx.Err() != context.DeadlineExceeded {
			t.Fatalf("%v: Err = %v", d, ctx.Err())
		}
		select {
		case <-ctx.Done():
		default:
			t.Fatalf("%v: not done", d)
		}
		cancel()
	}
}

func TestDeadlineIsTheEarlier(t *testing.T) {
	before := time.Now()
	ctx, cancel := deadline.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, ok := ctx.Deadline()
	if !ok || d.Before(before.Add(time.Minute)) || d.After(time.Now().Add(time.Minute)) {
		t.Fatalf("Deadline = %v, %v", d, ok)
	}
	parent, stop := context.WithTimeout(context.Background(), time.Second)
	defer stop()
	pd, _ := parent.Deadline()
	ctx, cancel = deadline.WithTimeout(parent, time.Hour)
	defer cancel()
	d, ok = ctx.Deadline()
	require.True(t, ok, "Deadline = %v, want the parent's %v", d, pd)
	require.True(t, d.Equal(pd), "Deadline = %v, want the parent's %v", d, pd)
}

// A context derived from it ends with it; its Err is Canceled, its cause
// DeadlineExceeded (the documented difference from context.WithTimeout).
func TestDerivedContextEnds(t *testing.T) {
	ctx, cancel := deadline.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	child, stop := context.WithCancel(ctx)
	defer stop()
	<-child.Done()
	if child.Err() != context.Canceled || context.Cause(child) != context.DeadlineExceeded {
		t.Fatalf("child Err = %v, Cause = %v", child.Err(), context.Cause(child))
	}
}

func ExampleWithTimeout() {
	ctx, cancel := deadline.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	fmt.Println(ctx.Err())
	// Output: context deadline exceeded
}
