package outbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// keyOf is the idempotency key of record id.
func keyOf(h *harness, id string) string { return h.get(id).IdempotencyKey }

// A rejected mutation settles its record as its own 4xx would (terminal,
// conflict) and stops only its entity: the records after it come back
// not-attempted, waiting with no attempt spent; the other entity goes on.
func TestBatchRejectedMutationStopsOnlyItsEntity(t *testing.T) {
	h, fr := batchHarness(t, nil)
	ids := enqueueEntities(h, 3, 3)
	a, b, c := ids["note:e0"], ids["note:e1"], ids["note:e2"]
	bad := map[string]wire.BatchResult{
		keyOf(h, a[1]): {Status: 422, Body: []byte(`{"error":"invalid"}`)},
		keyOf(h, c[0]): {Status: 409, Body: []byte(`{"error":"conflict"}`)},
	}
	fr.handle = func(m wire.BatchMutation) wire.BatchResult { return bad[m.Key] }
	rep := drain(t, h)
	require.Equal(t, 1, rep.Requests)
	require.Equal(t, queue.StatusAcked, h.get(a[0]).Status)
	ra := h.get(a[1])
	require.Equal(t, queue.StatusTerminalFailed, ra.Status)
	require.Equal(t, 422, ra.LastError.Status)
	require.Equal(t, queue.StatusConflict, h.get(c[0]).Status)
	for _, id := range []string{a[2], c[1], c[2]} {
		r := h.get(id)
		require.Equal(t, queue.StatusPending, r.Status, id)
		require.Equal(t, 0, r.Attempts, "a not-attempted mutation spends no attempt")
	}
	for _, id := range b {
		require.Equal(t, queue.StatusAcked, h.get(id).Status)
	}
	require.Equal(t, 1, rep.Terminal)
	require.Equal(t, 1, rep.Conflicts)
	require.Equal(t, 4, rep.Acked)
}

// A mutation's retry is its record's retry: charged, backed off by its own
// retryAfter; a 409 request-in-flight is retried, not a conflict.
func TestBatchRetryAfterPerRecord(t *testing.T) {
	h, fr := batchHarness(t, nil)
	ids := enqueueEntities(h, 3, 2)
	a, b, c := ids["note:e0"], ids["note:e1"], ids["note:e2"]
	bad := map[string]wire.BatchResult{
		keyOf(h, a[0]): {Status: 503, RetryAfter: 30 * time.Second},
		keyOf(h, b[0]): {Status: 503, RetryAfter: 120 * time.Second},
		keyOf(h, c[0]): {Status: 409, Problem: wire.ProblemInFlight, RetryAfter: 7 * time.Second},
	}
	fr.handle = func(m wire.BatchMutation) wire.BatchResult { return bad[m.Key] }
	rep := drain(t, h)
	require.Equal(t, 3, rep.Retried)
	for id, d := range map[string]time.Duration{a[0]: 30 * time.Second, b[0]: 120 * time.Second, c[0]: 7 * time.Second} {
		r := h.get(id)
		require.Equal(t, queue.StatusFailed, r.Status, id)
		require.Equal(t, 1, r.Attempts)
		require.False(t, r.NextAttemptAt.Before(t0.Add(d)), "Retry-After %v not honoured: %v", d, r.NextAttemptAt.Sub(t0))
	}
	for _, id := range []string{a[1], b[1], c[1]} {
		require.Equal(t, 0, h.get(id).Attempts)
	}
	// Due again after the backoff: the same keys, acked once each.
	fr.handle = nil
	h.clock.Add(time.Hour)
	drain(t, h)
	requireAllAckedOnce(t, h, fr, ids)
}

// A replayed result is acked with the stored answer, marked replayed.
func TestBatchLostResponseReplaysEachMutationOnce(t *testing.T) {
	h, fr := batchHarness(t, nil)
	ids := enqueueEntities(h, 2, 5)
	fr.lose = 1 // the server commits the first batch, its answer is lost
	rep := drain(t, h)
	require.Equal(t, 10, rep.Retried)
	for _, l := range ids {
		for _, id := range l {
			r := h.get(id)
			require.Equal(t, queue.StatusFailed, r.Status)
			require.Equal(t, queue.CodeNetwork, r.LastError.Code)
		}
	}
	h.clock.Add(time.Hour)
	rep = drain(t, h)
	require.Equal(t, 10, rep.Acked)
	requireAllAckedOnce(t, h, fr, ids)
	r := h.get(ids["note:e0"][0])
	require.True(t, r.Response.Replayed)
	require.Equal(t, 2, r.Attempts)
	require.Len(t, fr.batches, 2)
	require.Equal(t, fr.batches[0], fr.batches[1], "the resent batch carries the same keys and bodies")
}

// A record's dependency on another entity's record holds across batches:
// it is sent only after its dependency was acked, in a later request.
func TestBatchDependenciesAcrossEntities(t *testing.T) {
	h, fr := batchHarness(t, nil)
	a1 := h.enqueue(outbox.Op{OperationType: "comment", EntityType: "note", EntityID: "a", Payload: []byte("1")})
	b1 := h.enqueue(outbox.Op{OperationType: "comment", EntityType: "note", EntityID: "b", Payload: []byte("2"), DependencyIDs: []string{a1.ID}})
	c1 := h.enqueue(outbox.Op{OperationType: "comment", EntityType: "note", EntityID: "c", Payload: []byte("3")})
	rep := drain(t, h)
	require.Equal(t, 3, rep.Acked)
	require.Equal(t, []string{a1.ID, c1.ID, b1.ID}, fr.order)
	require.Equal(t, []int{2, 1}, fr.sizes())
}

// A record whose endpoint is another host's URL cannot be a mutation of
// the batch (which names paths on the batch endpoint's origin): it is sent
// alone, where it would go, and so is a path beside an absolute batch
// endpoint; a same-origin URL is batched by its path.
func TestBatchOtherHostEndpointSentAlone(t *testing.T) {
	h, fr := batchHarness(t, func(c *outbox.Config) {
		c.BatchEndpoint = "https://app.example" + batchRoute
		c.Policies["ext"] = queue.Policy{Dedupe: queue.Append, Endpoint: "https://other.example/api/x"}
		c.Policies["same"] = queue.Policy{Dedupe: queue.Append, Endpoint: "https://APP.example/api/notes?v=2#frag"}
	})
	fr.batchURL = "https://app.example" + batchRoute
	ext := h.enqueue(outbox.Op{OperationType: "ext", EntityType: "x", EntityID: "1", Payload: []byte("x")})
	same := h.enqueue(outbox.Op{OperationType: "same", EntityType: "n", EntityID: "1", Payload: []byte("s")})
	plain := h.enqueue(outbox.Op{OperationType: "comment", EntityType: "n", EntityID: "2", Payload: []byte("p")})
	rep := drain(t, h)
	require.Equal(t, 3, rep.Acked)
	require.Equal(t, 3, rep.Requests)
	// The path goes to the transport's base, not known to be the batch
	// endpoint's origin: alone too.
	require.ElementsMatch(t, []string{keyOf(h, ext.ID), keyOf(h, plain.ID)}, fr.singles)
	require.Len(t, fr.batches, 1)
	require.Len(t, fr.batches[0], 1)
	require.Equal(t, "/api/notes?v=2", fr.batches[0][0].Endpoint)
	require.Equal(t, same.ID, fr.batches[0][0].OperationID)
	for _, r := range h.sent() {
		if r.RecordID == ext.ID {
			require.Equal(t, "https://other.example/api/x", r.Endpoint)
		}
	}
}

// A payload kept in the blob store travels in the batch like an inline one.
func TestBatchSendsBlobPayloads(t *testing.T) {
	h, fr := batchHarness(t, func(c *outbox.Config) { c.InlineLimit = 4 })
	big := h.enqueue(outbox.Op{OperationType: "comment", EntityType: "n", EntityID: "1", Payload: []byte(`{"text":"a long note"}`)})
	small := h.enqueue(outbox.Op{OperationType: "comment", EntityType: "n", EntityID: "1", Payload: []byte(`1`)})
	require.NotEmpty(t, h.get(big.ID).PayloadRef)
	drain(t, h)
	require.Len(t, fr.batches, 1)
	require.Equal(t, `{"text":"a long note"}`, string(fr.batches[0][0].Payload))
	require.Equal(t, `1`, string(fr.batches[0][1].Payload))
	require.Equal(t, queue.StatusAcked, h.get(small.ID).Status)
}

// A newer session announced after the claim: nothing of the page is sent
// (the transport would attach the new user's credentials), and its
// records are handed back with no attempt or send counted.
func TestBatchSessionChangedBeforeSendSendsNothing(t *testing.T) {
	var ob *outbox.Outbox
	h, fr := batchHarness(t, func(c *outbox.Config) {
		c.Events = outbox.EventsFunc(func(e outbox.Event) {
			if e.Kind == outbox.EventClaim {
				ob.NoteSession(99)
			}
		})
	})
	ob = h.ob
	ids := enqueueEntities(h, 2, 2)
	_, err := h.flush("A")
	require.ErrorIs(t, err, outbox.ErrSessionChanged)
	require.Empty(t, fr.batches)
	for _, l := range ids {
		for _, id := range l {
			r := h.get(id)
			require.Equal(t, queue.StatusPending, r.Status)
			require.Equal(t, 0, r.Attempts)
			require.Equal(t, 0, r.Sends)
		}
	}
}
