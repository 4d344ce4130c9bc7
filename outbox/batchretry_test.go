package outbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// A server answering not-attempted for an entity's first mutation (no
// earlier failure to explain it) does not make the flush resend at once
// until its deadline: the record is retried, charged, and backs off.
func TestBatchNotAttemptedFirstOfEntityBacksOff(t *testing.T) {
	h, fr := batchHarness(t, nil)
	ids := enqueueEntities(h, 1, 1)
	fr.whole = func(_ int, ms []wire.BatchMutation) (outbox.Response, bool) {
		h.clock.Add(10 * time.Millisecond)
		rs := []wire.BatchResult{{Key: ms[0].Key, Outcome: wire.BatchNotAttempted}}
		return outbox.Response{Status: 200, Body: wire.AppendBatchResponse(nil, rs)}, true
	}
	rep, err := h.ob.Flush(t.Context(), h.lease("A"))
	require.NoError(t, err)
	require.Equal(t, 1, rep.Requests)
	rec := h.get(ids["note:e0"][0])
	require.Equal(t, queue.StatusFailed, rec.Status)
	require.Equal(t, 1, rec.Attempts)
	require.Equal(t, outbox.CodeNotAttempted, rec.LastError.Code)
	require.True(t, rec.NextAttemptAt.After(h.clock.Now()), "backs off")
}

// A mutation the receiver's batch budget left unstarted (retry,
// server-busy) is handed back uncharged and due at once the first time;
// the next in a row is charged and backs off: a server always busy is not
// hammered until the flush's deadline.
func TestBatchServerBusyRefundedOnceInARow(t *testing.T) {
	h, fr := batchHarness(t, nil)
	ids := enqueueEntities(h, 1, 1)
	busy := true
	fr.handle = func(wire.BatchMutation) wire.BatchResult {
		h.clock.Add(10 * time.Millisecond)
		if busy {
			return wire.BatchResult{Status: 503, Problem: wire.ProblemBusy}
		}
		return wire.BatchResult{}
	}
	rep, err := h.ob.Flush(t.Context(), h.lease("A"))
	require.NoError(t, err)
	require.Equal(t, 2, rep.Requests, "resent at once once, then backs off")
	rec := h.get(ids["note:e0"][0])
	require.Equal(t, queue.StatusFailed, rec.Status)
	require.Equal(t, 1, rec.Attempts, "the first busy answer cost no attempt")
	require.Equal(t, outbox.CodeServerBusy, rec.LastError.Code)

	// Busy again after its backoff: charged again (still in a row).
	h.clock.Add(time.Hour)
	rep, err = h.ob.Flush(t.Context(), h.lease("A"))
	require.NoError(t, err)
	require.Equal(t, 1, rep.Requests)
	require.Equal(t, 2, h.get(rec.ID).Attempts)

	busy = false
	h.clock.Add(time.Hour)
	drain(t, h)
	require.Equal(t, queue.StatusAcked, h.get(rec.ID).Status)
	require.Equal(t, 3, h.get(rec.ID).Attempts)
}
