//go:build !(js && wasm)

package locks

import (
	"context"
	"sync"
	"testing"
)

// Natively the election runs on fakeLocks, an in-memory model of
// navigator.locks (exclusive mode, ifAvailable, steal, abort), so the same
// scenarios also run under the race detector. In the browser they run on the
// real thing (election_js_test.go).

var fake = &fakeLocks{held: map[string]*fakeReq{}, queue: map[string][]*fakeReq{}}

func testBackend(*testing.T) backend {
	return backend{available: func() error { return nil }, request: fake.request, query: fake.query, beacon: bus.open}
}

type fakeLocks struct {
	mu    sync.Mutex
	held  map[string]*fakeReq
	queue map[string][]*fakeReq
}

type fakeReq struct {
	grant  chan struct{}
	stolen chan struct{}
}

func (f *fakeLocks) request(ctx context.Context, name string, opts Options, fn func(context.Context) error, queued func()) error {
	if err := opts.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &fakeReq{grant: make(chan struct{}), stolen: make(chan struct{})}
	f.mu.Lock()
	switch {
	case opts.Steal:
		if h := f.held[name]; h != nil {
			close(h.stolen)
		}
		f.held[name] = r
		close(r.grant)
	case f.held[name] == nil && len(f.queue[name]) == 0:
		f.held[name] = r
		close(r.grant)
	case opts.IfAvailable:
		f.mu.Unlock()
		return ErrNotAcquired
	default:
		f.queue[name] = append(f.queue[name], r)
	}
	f.mu.Unlock()
	if queued != nil {
		queued()
	}
	select {
	case <-r.grant:
	case <-ctx.Done():
		f.mu.Lock()
		q := f.queue[name]
		for i, x := range q {
			if x == r {
				f.queue[name] = append(q[:i:i], q[i+1:]...)
				f.mu.Unlock()
				return ctx.Err()
			}
		}
		f.mu.Unlock()
		<-r.grant // granted concurrently
	}
	fctx, cancel := context.WithCancelCause(ctx)
	done := make(chan error, 1)
	go func() { done <- runFn(fctx, fn) }()
	select {
	case err := <-done:
		f.release(name, r)
		cancel(nil)
		return err
	case <-r.stolen:
		cancel(ErrStolen)
		<-done
		return ErrStolen
	}
}

func (f *fakeLocks) release(name string, r *fakeReq) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[name] != r {
		return // stolen meanwhile
	}
	delete(f.held, name)
	if q := f.queue[name]; len(q) > 0 {
		f.held[name] = q[0]
		f.queue[name] = q[1:]
		close(q[0].grant)
	}
}

func (f *fakeLocks) query(context.Context) (Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s Snapshot
	for n := range f.held {
		s.Held = append(s.Held, Info{Name: n})
	}
	for n, q := range f.queue {
		for range q {
			s.Pending = append(s.Pending, Info{Name: n})
		}
	}
	return s, nil
}

// holdByHand takes the lock name outside any election (like an old tab).
func holdByHand(t *testing.T, ctx context.Context, name string, fn func(context.Context) error) error {
	return fake.request(ctx, name, Options{}, fn, nil)
}
