package outbox_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/wire"
)

const batchRoute = "/api/batch"

// fakeReceiver answers single POSTs and batches at batchRoute by the
// receiver's batch contract (receiver/README.md), with wire's codec: a key
// is run once and its answer stored (2xx and 4xx), replayed after; a 5xx
// is not stored; a mutation after one of its entity that did not succeed
// is not attempted. handle decides a new key's answer (default 201).
type fakeReceiver struct {
	t        *testing.T
	mu       sync.Mutex
	maxBatch int
	batchURL string                                      // where batches are POSTed (default batchRoute)
	handle   func(m wire.BatchMutation) wire.BatchResult // a new key's answer: Status (0: 201), Body, RetryAfter, Problem
	// whole, when set, answers a batch request instead (ok false: go on).
	whole    func(n int, ms []wire.BatchMutation) (outbox.Response, bool)
	stored   map[string]wire.BatchResult
	effects  map[string]int // key -> times its handler ran with a 2xx
	order    []string       // record ids, in the order applied
	batches  [][]wire.BatchMutation
	singles  []string // keys of single POSTs
	inflight map[string]bool
	overlap  bool // an entity was in two requests at once
	// gate, when set, holds each batch request until it returns.
	gate func()
	// lose: the answer to the n-th batch (1-based) is lost after commit.
	lose int
}

func newFakeReceiver(t *testing.T) *fakeReceiver {
	return &fakeReceiver{t: t, maxBatch: 100, batchURL: batchRoute, stored: map[string]wire.BatchResult{}, effects: map[string]int{},
		inflight: map[string]bool{}}
}

// batchHarness is a harness whose outbox batches to a fakeReceiver.
func batchHarness(t *testing.T, mod func(*outbox.Config)) (*harness, *fakeReceiver) {
	fr := newFakeReceiver(t)
	h := newHarness(t, func(c *outbox.Config) {
		c.BatchEndpoint = batchRoute
		if mod != nil {
			mod(c)
		}
	})
	h.reply = fr.serve
	return h, fr
}

func (fr *fakeReceiver) serve(req outbox.Request) (outbox.Response, error) {
	if req.Endpoint != fr.batchURL {
		return fr.single(req), nil
	}
	require.Empty(fr.t, req.Header.Get(wire.HeaderIdempotencyKey), "a batch has no Idempotency-Key")
	require.NotEmpty(fr.t, req.Header.Get(wire.HeaderFencingToken))
	require.NotEmpty(fr.t, req.Header.Get(wire.HeaderClientUser))
	ms, err := wire.ParseBatchRequest(req.Body, 1<<20)
	require.NoError(fr.t, err, "the outbox sent a malformed batch")
	fr.mu.Lock()
	fr.batches = append(fr.batches, ms)
	n := len(fr.batches)
	for _, m := range ms {
		if fr.inflight[m.Entity] && m.Entity != "" {
			fr.overlap = true
		}
	}
	for _, m := range ms {
		fr.inflight[m.Entity] = true
	}
	whole := fr.whole
	fr.mu.Unlock()
	defer func() {
		fr.mu.Lock()
		for _, m := range ms {
			delete(fr.inflight, m.Entity)
		}
		fr.mu.Unlock()
	}()
	if fr.gate != nil {
		fr.gate()
	}
	if whole != nil {
		if resp, ok := whole(n, ms); ok {
			return resp, nil
		}
	}
	if len(ms) > fr.maxBatch {
		return outbox.Response{Status: 413, Body: []byte(`{"type":"` + wire.ProblemBatchTooLarge + `"}`)}, nil
	}
	rs := fr.run(ms)
	if n == fr.lose {
		return outbox.Response{}, errLost
	}
	return outbox.Response{Status: 200, Body: wire.AppendBatchResponse(nil, rs)}, nil
}

type lostError struct{}

func (lostError) Error() string { return "response lost" }

var errLost error = lostError{}

// run answers ms in order, all-or-nothing being moot here (no crash).
func (fr *fakeReceiver) run(ms []wire.BatchMutation) []wire.BatchResult {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	failed := map[string]bool{}
	rs := make([]wire.BatchResult, len(ms))
	for i, m := range ms {
		if m.Entity != "" && failed[m.Entity] {
			rs[i] = wire.BatchResult{Key: m.Key, Outcome: wire.BatchNotAttempted}
			continue
		}
		r := fr.answer(m)
		rs[i] = r
		if r.Status < 200 || r.Status > 299 {
			failed[m.Entity] = true
		}
	}
	return rs
}

// answer runs or replays one mutation (fr.mu held).
func (fr *fakeReceiver) answer(m wire.BatchMutation) wire.BatchResult {
	if s, ok := fr.stored[m.Key]; ok {
		s.Outcome = wire.BatchReplayed
		return s
	}
	r := wire.BatchResult{Status: 201, Body: []byte(`{"ok":true}`)}
	if fr.handle != nil {
		if h := fr.handle(m); h.Status != 0 {
			r = h
		}
	}
	r.Key = m.Key
	st := r.Status
	switch {
	case st >= 200 && st < 300:
		r.Outcome = wire.BatchApplied
		fr.effects[m.Key]++
		fr.order = append(fr.order, m.OperationID)
	case st >= 400 && st < 500 && r.Problem != wire.ProblemInFlight:
		r.Outcome = wire.BatchRejected
	default:
		r.Outcome = wire.BatchRetry
		return r
	}
	fr.stored[m.Key] = r
	return r
}

// single answers a POST of one record by the same store of keys.
func (fr *fakeReceiver) single(req outbox.Request) outbox.Response {
	key, err := wire.ParseIdempotencyKey(req.Header.Get(wire.HeaderIdempotencyKey))
	require.NoError(fr.t, err)
	fr.mu.Lock()
	defer fr.mu.Unlock()
	fr.singles = append(fr.singles, key)
	r := fr.answer(wire.BatchMutation{Key: key, Endpoint: req.Endpoint, OperationID: req.RecordID, Payload: req.Body})
	h := outbox.Header{}
	if r.Outcome == wire.BatchReplayed {
		h[wire.HeaderReplayed] = "true"
	}
	if r.RetryAfter > 0 {
		h[wire.HeaderRetryAfter] = strconv.Itoa(int(r.RetryAfter.Seconds()))
	}
	if r.Problem != "" && len(r.Body) == 0 {
		r.Body = []byte(`{"type":"` + r.Problem + `"}`)
	}
	return outbox.Response{Status: r.Status, Body: r.Body, Header: h}
}

// sizes is the mutations of each batch request, in order.
func (fr *fakeReceiver) sizes() []int {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	var n []int
	for _, b := range fr.batches {
		n = append(n, len(b))
	}
	return n
}

// enqueueEntities enqueues per entities of each records, entity by entity,
// and returns the record ids of each entity in enqueue order.
func enqueueEntities(h *harness, entities, each int) map[string][]string {
	ids := map[string][]string{}
	for e := 0; e < entities; e++ {
		for i := 0; i < each; i++ {
			id := "e" + strconv.Itoa(e)
			r := h.enqueue(outbox.Op{OperationType: "comment", EntityType: "note", EntityID: id, Payload: []byte(`{"n":` + strconv.Itoa(i) + `}`)})
			ids["note:"+id] = append(ids["note:"+id], r.ID)
		}
	}
	return ids
}

// drain flushes until nothing is due.
func drain(t *testing.T, h *harness) outbox.FlushReport {
	t.Helper()
	rep, err := h.ob.Flush(context.Background(), h.lease("A"))
	require.NoError(t, err)
	return rep
}
