package outbox_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/memstore"
	"github.com/tabfence/tabfence/outbox/queue"
)

// batchStore records the UpdateBatch calls of a memstore.Store; gate, when set,
// runs before each call's transaction.
type batchStore struct {
	*memstore.Store
	mu    sync.Mutex
	sizes []int
	gate  func(call int)
}

func (s *batchStore) UpdateBatch(ctx context.Context, l queue.Lease, ups []outbox.RecordUpdate) ([]outbox.UpdateResult, error) {
	s.mu.Lock()
	call := len(s.sizes)
	s.sizes = append(s.sizes, len(ups))
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		gate(call)
	}
	return s.Store.UpdateBatch(ctx, l, ups)
}

// entity enqueues n records of one entity ("n"), in order, and returns
// their ids.
func (h *harness) entity(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = h.enqueue(outbox.Op{OperationType: "comment", EntityID: "n", Payload: []byte("p" + strconv.Itoa(i))}).ID
	}
	return ids
}

// chargedUnsent returns the records charged (attempts > 0) whose request
// was never started: a crash at this moment would leave them charged
// although never sent.
func chargedUnsent(t *testing.T, s outbox.Store, sent map[string]bool) []string {
	recs, err := s.List(context.Background(), outbox.Filter{})
	require.NoError(t, err)
	var out []string
	for _, r := range recs {
		if r.Attempts > 0 && !sent[r.ID] {
			out = append(out, r.ID)
		}
	}
	return out
}

// The tests up to TestGroupCommitStress pin ChargeAhead 1, the exact mode:
// each step acks the previous record and charges the next.

// One entity: each record costs ONE transaction on the lane (the previous
// record's ack and this record's charge together), the next record is sent
// only once its predecessor's ack is durable, and at every send exactly the
// records sent so far are charged (a crash then leaves at most the record in
// flight charged, and nothing that was not sent).
func TestLaneAckAndNextChargeInOneTransaction(t *testing.T) {
	bs := &batchStore{Store: memstore.New()}
	h := newHarness(t, func(c *outbox.Config) { c.Store = bs; c.Concurrency = 1; c.ChargeAhead = 1 })
	h.store = bs.Store
	ids := h.entity(4)
	sent := map[string]bool{}
	h.reply = func(r outbox.Request) (outbox.Response, error) {
		sent[r.RecordID] = true
		i := 0
		for ids[i] != r.RecordID {
			i++
		}
		cur := h.get(r.RecordID)
		require.Equal(t, queue.StatusSending, cur.Status)
		require.Equal(t, 1, cur.Attempts) // charged, durably, before the send
		if i > 0 {
			require.Equal(t, queue.StatusAcked, h.get(ids[i-1]).Status) // predecessor's ack is durable
		}
		for _, later := range ids[i+1:] {
			require.Equal(t, 0, h.get(later).Attempts)
		}
		require.Len(t, chargedUnsent(t, bs, sent), 0)
		return outbox.Response{Status: 200, Body: []byte(`{"ok":true}`)}, nil
	}
	rep, err := h.flush("A")
	require.NoError(t, err)
	require.Equal(t, 4, rep.Acked)
	// charge 1; ack 1 + charge 2; ack 2 + charge 3; ack 3 + charge 4; ack 4.
	require.Equal(t, []int{1, 2, 2, 2, 1}, bs.sizes)
	for _, id := range ids {
		r := h.get(id)
		require.Equal(t, queue.StatusAcked, r.Status)
		require.Equal(t, 1, r.Attempts)
	}
	var kinds []outbox.EventKind
	for _, e := range h.events {
		if e.Kind == outbox.EventAck {
			kinds = append(kinds, e.Kind)
		}
	}
	require.Len(t, kinds, 4)
}

// A lane that stops (a retryable failure) releases the rest of its entity
// uncharged, and a deadline commits the last ack together with the release.
func TestLaneStopsChargingNothingMore(t *testing.T) {
	bs := &batchStore{Store: memstore.New()}
	h := newHarness(t, func(c *outbox.Config) { c.Store = bs; c.ChargeAhead = 1 })
	h.store = bs.Store
	ids := h.entity(4)
	h.reply = secondFails()
	rep, err := h.flush("A")
	require.NoError(t, err)
	require.Equal(t, 1, rep.Acked)
	require.Equal(t, 1, rep.Retried)
	require.Equal(t, 2, rep.Released)
	require.Equal(t, queue.StatusAcked, h.get(ids[0]).Status)
	require.Equal(t, queue.StatusFailed, h.get(ids[1]).Status)
	require.Equal(t, 1, h.get(ids[1]).Attempts)
	for _, id := range ids[2:] {
		r := h.get(id)
		require.Equal(t, queue.StatusPending, r.Status)
		require.Equal(t, 0, r.Attempts)
	}
}

// Concurrent lanes share transactions: while one batch commits, the steps
// the other lanes ask for queue up and go together in the next one. Per-
// entity order, exact charges and one effect per record still hold.
func TestConcurrentLanesGroupCommit(t *testing.T) {
	const lanes, per = 4, 5
	bs := &batchStore{Store: memstore.New()}
	queued := make(chan struct{}, 64)
	outbox.SetTestHookQueued(func() { queued <- struct{}{} })
	defer func() { outbox.SetTestHookQueued(nil) }()
	// The first transaction waits until the three other lanes queued their
	// first charge behind it: the next batch must carry all three.
	bs.gate = func(call int) {
		if call == 0 {
			for i := 0; i < lanes-1; i++ {
				<-queued
			}
		}
	}
	h := newHarness(t, func(c *outbox.Config) { c.Store = bs; c.Concurrency = lanes; c.BatchSize = 100; c.ChargeAhead = 1 })
	h.store = bs.Store
	var mu sync.Mutex
	order := map[string][]string{}
	sent := map[string]bool{}
	h.reply = func(r outbox.Request) (outbox.Response, error) {
		mu.Lock()
		defer mu.Unlock()
		sent[r.RecordID] = true
		e := string(r.Body[:2])
		order[e] = append(order[e], string(r.Body))
		return outbox.Response{Status: 200}, nil
	}
	for i := 0; i < per; i++ {
		for e := 0; e < lanes; e++ {
			h.enqueue(outbox.Op{OperationType: "comment", EntityID: "e" + strconv.Itoa(e), Payload: []byte("e" + strconv.Itoa(e) + "#" + strconv.Itoa(i))})
		}
	}
	rep, err := h.flush("A")
	require.NoError(t, err)
	require.Equal(t, lanes*per, rep.Acked)
	require.Equal(t, 1, bs.sizes[0])
	require.True(t, bs.sizes[1] >= lanes-1, bs.sizes) // the three queued charges (and whatever queued since)
	total := 0
	for _, n := range bs.sizes {
		total += n
	}
	require.Equal(t, 2*lanes*per, total) // one charge and one ack per record
	require.True(t, len(bs.sizes) < 2*lanes*per, len(bs.sizes))
	for e, got := range order {
		require.Len(t, got, per)
		for i, b := range got {
			require.Equal(t, e+"#"+strconv.Itoa(i), b)
		}
	}
	recs, _ := bs.List(context.Background(), outbox.Filter{})
	for _, r := range recs {
		require.Equal(t, queue.StatusAcked, r.Status)
		require.Equal(t, 1, r.Attempts)
	}
	require.Len(t, chargedUnsent(t, bs, sent), 0)
}

// The flush ending (ctx done) between a response and the next charge: the
// ack is still written, the next record is not charged and goes back.
func TestLaneEndingWritesAckChargesNothing(t *testing.T) {
	for _, where := range []string{"before the step", "inside the step"} {
		t.Run(where, func(t *testing.T) {
			bs := &batchStore{Store: memstore.New()}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if where == "inside the step" {
				// The context ends after the lane checked it, while its
				// step (ack 1 + charge 2) is being committed.
				bs.gate = func(call int) {
					if call == 1 {
						cancel()
					}
				}
			}
			h := newHarness(t, func(c *outbox.Config) { c.Store = bs; c.ChargeAhead = 1 })
			h.store = bs.Store
			ids := h.entity(3)
			h.reply = func(outbox.Request) (outbox.Response, error) {
				if where == "before the step" {
					cancel()
				}
				return outbox.Response{Status: 200}, nil
			}
			rep, err := h.ob.Flush(ctx, h.lease("A"))
			require.NoError(t, err)
			require.Equal(t, 1, rep.Acked)
			require.Equal(t, 2, rep.Released)
			require.Len(t, h.sent(), 1)
			require.Equal(t, queue.StatusAcked, h.get(ids[0]).Status)
			for _, id := range ids[1:] {
				r := h.get(id)
				require.Equal(t, queue.StatusPending, r.Status)
				require.Equal(t, 0, r.Attempts)
			}
		})
	}
}

// The previous record vanished (a logout purged it) while it was sent: the
// next one is not charged nor sent in that step, but handed back uncharged
// (the flush's next claim then sends it, charged once).
func TestLaneStopsWhenAckHasNoRecord(t *testing.T) {
	bs := &batchStore{Store: memstore.New()}
	h := newHarness(t, func(c *outbox.Config) { c.Store = bs; c.ChargeAhead = 1 })
	h.store = bs.Store
	ids := h.entity(3)
	var charged []int
	h.reply = func(r outbox.Request) (outbox.Response, error) {
		if r.RecordID == ids[0] {
			_, err := bs.Delete(context.Background(), outbox.Filter{IDs: []string{ids[0]}})
			require.NoError(t, err)
		} else {
			charged = append(charged, h.get(ids[2]).Attempts)
		}
		return outbox.Response{Status: 200}, nil
	}
	rep, err := h.flush("A")
	require.NoError(t, err)
	require.Equal(t, 2, rep.Released) // ids[1] and ids[2], after the ack found no record
	require.Equal(t, 2, rep.Batches)
	require.Equal(t, 2, rep.Acked)
	require.Len(t, h.sent(), 3)
	require.Equal(t, []int{0, 1}, charged) // ids[2] uncharged while ids[1] was sent
	for _, id := range ids[1:] {
		r := h.get(id)
		require.Equal(t, queue.StatusAcked, r.Status)
		require.Equal(t, 1, r.Attempts)
	}
}

// Many lanes, a store that yields at random inside its transactions, and
// failures: every flush ends (the group commit never strands a lane), and
// every record ends acked exactly once or waiting uncharged-or-failed.
func TestGroupCommitStress(t *testing.T) {
	for seed := uint64(0); seed < 40; seed++ {
		bs := &batchStore{Store: memstore.New()}
		rng := rand.New(rand.NewPCG(seed, 7))
		var rmu sync.Mutex
		yield := func() {
			rmu.Lock()
			n := rng.IntN(4)
			rmu.Unlock()
			for i := 0; i < n; i++ {
				runtime.Gosched()
			}
		}
		bs.gate = func(int) { yield() }
		h := newHarness(t, func(c *outbox.Config) {
			c.Store = bs
			c.Concurrency, c.BatchSize, c.ChargeAhead = 1+int(seed%8), 1+int(seed%30), 1+int(seed%9)
		})
		h.store = bs.Store
		h.reply = func(r outbox.Request) (outbox.Response, error) {
			yield()
			rmu.Lock()
			fail := rng.IntN(10) == 0
			rmu.Unlock()
			if fail {
				return outbox.Response{Status: 503}, nil
			}
			return outbox.Response{Status: 200}, nil
		}
		for i := 0; i < 60; i++ {
			h.enqueue(outbox.Op{OperationType: "comment", EntityID: "e" + strconv.Itoa(i%9), Payload: []byte("p")})
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for round := 0; round < 50; round++ {
				h.clock.Add(time.Hour) // past every backoff
				if _, err := h.flush("A"); err != nil {
					t.Errorf("seed %d: %v", seed, err)
					return
				}
			}
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatalf("seed %d: flush did not end", seed)
		}
		recs, _ := bs.List(context.Background(), outbox.Filter{})
		sends := map[string]int{}
		for _, r := range h.sent() {
			sends[r.RecordID]++
		}
		for _, r := range recs {
			if r.Status != queue.StatusAcked {
				t.Fatalf("seed %d: %s is %s after 50 flushes", seed, r.ID, r.Status)
			}
			if r.Attempts != sends[r.ID] || r.Sends != sends[r.ID] || sends[r.ID] < 1 {
				t.Fatalf("seed %d: %s charged %d (sends %d) for %d requests", seed, r.ID, r.Attempts, r.Sends, sends[r.ID])
			}
		}
	}
}

// ChargeAhead 6: the lane charges three records per step, a step ahead of
// its sends, and writes the acks of a step with the charge of the step
// after the next. A record is sent only once its charge is durable; charged
// but unsent records never exceed ChargeAhead-1 at a send (and reach it:
// the step ahead is charged before the step's first send, Concurrency 1);
// at the end every record is charged exactly once.
func TestLaneChargesAheadInSteps(t *testing.T) {
	bs := &batchStore{Store: memstore.New()}
	h := newHarness(t, func(c *outbox.Config) { c.Store = bs; c.Concurrency = 1; c.ChargeAhead = 6 })
	h.store = bs.Store
	ids := h.entity(7)
	sent := map[string]bool{}
	var order []string
	most := 0
	h.reply = func(r outbox.Request) (outbox.Response, error) {
		sent[r.RecordID] = true
		order = append(order, r.RecordID)
		cur := h.get(r.RecordID)
		require.Equal(t, queue.StatusSending, cur.Status)
		require.Equal(t, 1, cur.Attempts) // charged, durably, before the send
		n := len(chargedUnsent(t, bs, sent))
		require.True(t, n <= 5, chargedUnsent(t, bs, sent))
		most = max(most, n)
		return outbox.Response{Status: 200}, nil
	}
	rep, err := h.flush("A")
	require.NoError(t, err)
	require.Equal(t, 7, rep.Acked)
	require.Equal(t, ids, order)
	require.Equal(t, 5, most)
	// charge 1-3; charge 4-6; ack 1-3 + charge 7; ack 4-7.
	require.Equal(t, []int{3, 3, 4, 4}, bs.sizes)
	for _, id := range ids {
		r := h.get(id)
		require.Equal(t, queue.StatusAcked, r.Status)
		require.Equal(t, 1, r.Attempts)
		require.Equal(t, 1, r.Sends)
	}
}

// With concurrent lanes allowed, the step ahead is charged while the step
// is on the network: the second step's transaction and the first record's
// request are in progress at the same time.
func TestLaneChargesNextStepWhileSending(t *testing.T) {
	bs := &batchStore{Store: memstore.New()}
	charging := make(chan struct{})
	bs.gate = func(call int) {
		if call == 1 {
			close(charging)
		}
	}
	h := newHarness(t, func(c *outbox.Config) { c.Store = bs; c.Concurrency = 2; c.ChargeAhead = 4 })
	h.store = bs.Store
	ids := h.entity(6)
	var order []string
	h.reply = func(r outbox.Request) (outbox.Response, error) {
		order = append(order, r.RecordID)
		if r.RecordID == ids[0] {
			select {
			case <-charging:
			case <-time.After(10 * time.Second):
				t.Error("the second step was not charged while the first record was in flight")
			}
		}
		require.Equal(t, 1, h.get(r.RecordID).Attempts) // charged, durably, before the send
		return outbox.Response{Status: 200}, nil
	}
	rep, err := h.flush("A")
	require.NoError(t, err)
	require.Equal(t, 6, rep.Acked)
	require.Equal(t, ids, order)
	// charge 1-2; charge 3-4 (during the sends of 1-2); ack 1-2 + charge
	// 5-6; ack 3-6.
	require.Equal(t, []int{2, 2, 4, 4}, bs.sizes)
	for _, id := range ids {
		r := h.get(id)
		require.Equal(t, queue.StatusAcked, r.Status)
		require.Equal(t, 1, r.Attempts)
	}
}

// A record of the step that is not acked stops the lane: the records
// charged with it but not sent are taken back (attempts and sends as
// before), the uncharged rest released, and nothing after it is sent.
func TestLaneStopMidStepUnsendsTheRest(t *testing.T) {
	bs := &batchStore{Store: memstore.New()}
	h := newHarness(t, func(c *outbox.Config) { c.Store = bs; c.Concurrency = 1; c.ChargeAhead = 4 })
	h.store = bs.Store
	ids := h.entity(6)
	h.reply = secondFails()
	rep, err := h.flush("A")
	require.NoError(t, err)
	require.Len(t, h.sent(), 2)
	require.Equal(t, 1, rep.Acked)
	require.Equal(t, 1, rep.Retried)
	require.Equal(t, 4, rep.Released)
	require.Equal(t, queue.StatusAcked, h.get(ids[0]).Status)
	require.Equal(t, queue.StatusFailed, h.get(ids[1]).Status)
	require.Equal(t, 1, h.get(ids[1]).Attempts)
	for _, id := range ids[2:] {
		r := h.get(id)
		require.Equal(t, queue.StatusPending, r.Status, id)
		require.Equal(t, 0, r.Attempts, id)
		require.Equal(t, 0, r.Sends, id)
	}
}

// The flush ends (deadline) in the middle of a step: the acks made so far
// are written, the charged records not sent are taken back.
func TestLaneDeadlineMidStep(t *testing.T) {
	bs := &batchStore{Store: memstore.New()}
	h := newHarness(t, func(c *outbox.Config) {
		c.Store = bs
		c.Concurrency = 1
		c.ChargeAhead = 5
		c.MaxFlushDuration = time.Minute
	})
	h.store = bs.Store
	ids := h.entity(5)
	n := 0
	h.reply = func(outbox.Request) (outbox.Response, error) {
		if n++; n == 2 {
			h.clock.Add(time.Hour) // the deadline passes during the second send
		}
		return outbox.Response{Status: 200}, nil
	}
	rep, err := h.flush("A")
	require.NoError(t, err)
	require.Equal(t, 2, rep.Acked)
	require.Equal(t, 3, rep.Released)
	for i, id := range ids {
		r := h.get(id)
		if i < 2 {
			require.Equal(t, queue.StatusAcked, r.Status, id)
			require.Equal(t, 1, r.Attempts, id)
			continue
		}
		require.Equal(t, queue.StatusPending, r.Status, id)
		require.Equal(t, 0, r.Attempts, id)
		require.Equal(t, 0, r.Sends, id)
	}
}

// secondFails is a reply that acks every send but the second, which gets a
// 503 (retryable).
func secondFails() func(outbox.Request) (outbox.Response, error) {
	n := 0
	return func(outbox.Request) (outbox.Response, error) {
		if n++; n == 2 {
			return outbox.Response{Status: 503}, nil
		}
		return outbox.Response{Status: 200}, nil
	}
}
