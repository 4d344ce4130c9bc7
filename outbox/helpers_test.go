package outbox_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/memstore"
	"github.com/tabfence/tabfence/outbox/queue"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// seqIDs returns deterministic ids.
func seqIDs() func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return "id" + strconv.Itoa(n)
	}
}

type harness struct {
	t      *testing.T
	clock  *fakeClock
	store  *memstore.Store
	ob     *outbox.Outbox
	events []outbox.Event
	reqs   []outbox.Request
	mu     sync.Mutex
	reply  func(req outbox.Request) (outbox.Response, error)
}

func newHarness(t *testing.T, mod func(*outbox.Config)) *harness {
	h := &harness{t: t, clock: &fakeClock{now: t0}, store: memstore.New()}
	h.reply = func(outbox.Request) (outbox.Response, error) {
		return outbox.Response{Status: 200, Body: []byte(`{"ok":true}`)}, nil
	}
	cfg := outbox.Config{
		Name: "test", Store: h.store, Clock: h.clock, NewID: seqIDs(), Concurrency: 1,
		Transport: outbox.TransportFunc(func(_ context.Context, r outbox.Request) (outbox.Response, error) {
			h.mu.Lock()
			h.reqs = append(h.reqs, r)
			reply := h.reply
			h.mu.Unlock()
			return reply(r)
		}),
		Events: outbox.EventsFunc(func(e outbox.Event) { h.mu.Lock(); h.events = append(h.events, e); h.mu.Unlock() }),
		Policies: map[string]queue.Policy{
			"comment": {Dedupe: queue.Append},
			"title":   {Dedupe: queue.ReplaceLatest},
			"tags":    {Dedupe: queue.Merge, Merge: func(a, b []byte) ([]byte, error) { return append(append(append([]byte{}, a...), ','), b...), nil }},
			"star":    {Dedupe: queue.DropIfExists},
		},
		Backoff: &outbox.Backoff{Base: time.Second, Cap: time.Minute, Rand: rand.New(rand.NewPCG(1, 2))},
	}
	if mod != nil {
		mod(&cfg)
	}
	ob, err := outbox.New(cfg)
	require.NoError(t, err)
	ob.Login(context.Background(), outbox.Session{UserID: "alice", TenantID: "t1", AuthGeneration: 1})
	h.ob = ob
	return h
}

func (h *harness) enqueue(op outbox.Op) queue.EnqueueResult {
	h.t.Helper()
	r, err := h.ob.Enqueue(context.Background(), op)
	require.NoError(h.t, err)
	return r
}

func (h *harness) lease(owner string) queue.Lease {
	h.t.Helper()
	l, err := h.ob.Acquire(context.Background(), owner, true)
	require.NoError(h.t, err)
	l.Resource, l.FenceToken = "outbox:test", l.Token
	return l
}

func (h *harness) get(id string) queue.Record {
	h.t.Helper()
	r, err := h.store.Get(context.Background(), id)
	require.NoError(h.t, err)
	return r
}

func (h *harness) flush(owner string) (outbox.FlushReport, error) {
	return h.ob.Flush(context.Background(), h.lease(owner))
}

func (h *harness) sent() []outbox.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]outbox.Request(nil), h.reqs...)
}
