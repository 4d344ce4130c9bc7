package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// allRecords is every record of ids.
func allRecords(h *harness, ids map[string][]string) []queue.Record {
	var out []queue.Record
	for _, l := range ids {
		for _, id := range l {
			out = append(out, h.get(id))
		}
	}
	return out
}

// wholeAnswer makes fr answer every batch request with resp (or err).
func wholeAnswer(fr *fakeReceiver, resp outbox.Response) {
	fr.whole = func(int, []wire.BatchMutation) (outbox.Response, bool) { return resp, true }
}

func TestBatchWhole5xxRetriesEveryRecordWithRetryAfter(t *testing.T) {
	h, fr := batchHarness(t, nil)
	ids := enqueueEntities(h, 2, 3)
	wholeAnswer(fr, outbox.Response{Status: 503, Header: outbox.Header{"Retry-After": "60"}})
	rep, err := h.flush("A")
	require.NoError(t, err)
	require.Equal(t, 1, rep.Requests)
	require.Equal(t, 6, rep.Retried)
	for _, r := range allRecords(h, ids) {
		require.Equal(t, queue.StatusFailed, r.Status)
		require.Equal(t, 1, r.Attempts, "a 5xx of the batch is charged, as a single 5xx is")
		require.False(t, r.NextAttemptAt.Before(t0.Add(60*time.Second)))
	}
	fr.whole = nil
	h.clock.Add(time.Hour)
	drain(t, h)
	requireAllAckedOnce(t, h, fr, ids)
}

func TestBatchNetworkErrorRetriesEveryRecord(t *testing.T) {
	h, fr := batchHarness(t, nil)
	ids := enqueueEntities(h, 2, 2)
	h.reply = func(outbox.Request) (outbox.Response, error) {
		return outbox.Response{}, errors.New("connection reset")
	}
	_, err := h.flush("A")
	require.NoError(t, err)
	for _, r := range allRecords(h, ids) {
		require.Equal(t, queue.StatusFailed, r.Status)
		require.Equal(t, 1, r.Attempts)
		require.Equal(t, queue.CodeNetwork, r.LastError.Code)
	}
	h.reply = fr.serve
	h.clock.Add(time.Hour)
	drain(t, h)
	requireAllAckedOnce(t, h, fr, ids)
}

func TestBatchOfflineRefundsEveryRecord(t *testing.T) {
	h, _ := batchHarness(t, nil)
	ids := enqueueEntities(h, 2, 2)
	h.reply = func(outbox.Request) (outbox.Response, error) {
		return outbox.Response{}, errors.Join(outbox.ErrOffline, errors.New("navigator offline"))
	}
	rep, err := h.flush("A")
	require.ErrorIs(t, err, outbox.ErrOffline)
	require.Equal(t, 1, rep.Requests)
	for _, r := range allRecords(h, ids) {
		require.Equal(t, queue.StatusPending, r.Status)
		require.Equal(t, 0, r.Attempts)
		require.Equal(t, queue.CodeOffline, r.LastError.Code)
	}
}

func TestBatchStaleTokenStepsDown(t *testing.T) {
	h, _ := batchHarness(t, nil)
	ids := enqueueEntities(h, 2, 2)
	h.reply = func(outbox.Request) (outbox.Response, error) {
		return outbox.Response{Status: 409, Header: outbox.Header{wire.HeaderFencingHighest: "99"}}, nil
	}
	rep, err := h.flush("A")
	var sd *outbox.StepDownError
	require.ErrorAs(t, err, &sd)
	require.Equal(t, uint64(99), sd.Highest)
	require.Equal(t, 1, rep.Requests)
	for _, r := range allRecords(h, ids) {
		require.Equal(t, queue.StatusPending, r.Status)
		require.Equal(t, 0, r.Attempts)
	}
}

func TestBatchUnauthorizedPausesUser(t *testing.T) {
	asked := 0
	h, _ := batchHarness(t, func(c *outbox.Config) {
		c.BatchMax = 2
		c.OnAuthRequired = func(string) { asked++ }
	})
	ids := enqueueEntities(h, 2, 2)
	h.reply = func(outbox.Request) (outbox.Response, error) { return outbox.Response{Status: 401}, nil }
	rep, err := h.flush("A")
	require.ErrorIs(t, err, outbox.ErrAuthRequired)
	require.Equal(t, 1, asked)
	require.Equal(t, 1, rep.Requests)
	for _, r := range allRecords(h, ids) {
		require.Equal(t, queue.StatusPending, r.Status)
		require.Equal(t, 0, r.Attempts)
	}
	st, err := h.ob.Status(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{"alice"}, st.AuthPaused)
	_, err = h.flush("A")
	require.ErrorIs(t, err, outbox.ErrPaused)
}

func TestBatchSessionMismatchHoldsUser(t *testing.T) {
	h, _ := batchHarness(t, nil)
	ids := enqueueEntities(h, 1, 2)
	h.reply = func(outbox.Request) (outbox.Response, error) {
		return outbox.Response{Status: 403, Body: []byte(`{"type":"` + wire.ProblemSessionMismatch + `"}`)}, nil
	}
	_, err := h.flush("A")
	require.ErrorIs(t, err, outbox.ErrSessionMismatch)
	for _, r := range allRecords(h, ids) {
		require.Equal(t, queue.StatusPending, r.Status)
		require.Equal(t, 0, r.Attempts)
		require.Equal(t, outbox.CodeSessionMismatch, r.LastError.Code)
	}
	st, err := h.ob.Status(context.Background())
	require.NoError(t, err)
	require.Equal(t, "alice", st.SessionHeld)
}

// A 413 hands the page back uncharged and halves the pages from then on;
// the flush finishes in smaller pages.
func TestBatchTooLargeHalvesPages(t *testing.T) {
	h, fr := batchHarness(t, nil)
	fr.maxBatch = 30
	ids := enqueueEntities(h, 4, 25)
	rep := drain(t, h)
	require.Equal(t, 100, rep.Acked)
	sizes := fr.sizes()
	require.Equal(t, []int{100, 50}, sizes[:2])
	for _, n := range sizes[2:] {
		require.LessOrEqual(t, n, 25)
	}
	requireAllAckedOnce(t, h, fr, ids)
	for _, r := range allRecords(h, ids) {
		require.Equal(t, 1, r.Attempts, "a refused page costs no attempt")
	}
	// The next flush starts at the smaller size.
	more := enqueueEntities(h, 1, 40)
	drain(t, h)
	require.Equal(t, 25, fr.sizes()[len(sizes)])
	for _, r := range allRecords(h, more) {
		require.Equal(t, queue.StatusAcked, r.Status)
	}
}

// A receiver without the batch route (404, 405, 501), or that calls the
// batch malformed, or answers 2xx with no results document for the keys
// sent: the page goes back uncharged and this Outbox sends one record per
// request, finishing the same flush; nothing is acked from the bad answer
// and nothing is dead-lettered.
func TestBatchUnsupportedFallsBackToSingleSends(t *testing.T) {
	cases := map[string]func(fr *fakeReceiver) func(int, []wire.BatchMutation) (outbox.Response, bool){
		"404":           fixed(outbox.Response{Status: 404}),
		"405":           fixed(outbox.Response{Status: 405}),
		"501":           fixed(outbox.Response{Status: 501}),
		"400 malformed": fixed(outbox.Response{Status: 400, Body: []byte(`{"type":"` + wire.ProblemBatchMalformed + `"}`)}),
		"200 html":      fixed(outbox.Response{Status: 200, Body: []byte(`<html>not found</html>`)}),
		// The server applied the batch, then answered with results for
		// other keys: none of them may ack a record.
		"200 wrong keys": func(fr *fakeReceiver) func(int, []wire.BatchMutation) (outbox.Response, bool) {
			return func(_ int, ms []wire.BatchMutation) (outbox.Response, bool) {
				rs := fr.run(ms)
				rs[0], rs[1] = rs[1], rs[0]
				return outbox.Response{Status: 200, Body: wire.AppendBatchResponse(nil, rs)}, true
			}
		},
		"200 applied without 2xx": func(fr *fakeReceiver) func(int, []wire.BatchMutation) (outbox.Response, bool) {
			return func(_ int, ms []wire.BatchMutation) (outbox.Response, bool) {
				rs := fr.run(ms)
				rs[len(rs)-1].Status = 500
				return outbox.Response{Status: 200, Body: wire.AppendBatchResponse(nil, rs)}, true
			}
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			h, fr := batchHarness(t, nil)
			ids := enqueueEntities(h, 2, 3)
			fr.whole = mk(fr)
			rep := drain(t, h)
			require.Equal(t, 6, rep.Acked)
			require.Zero(t, rep.DeadLettered+rep.Terminal)
			require.Len(t, fr.batches, 1)
			require.Len(t, fr.singles, 6)
			require.Equal(t, 7, rep.Requests)
			requireAllAckedOnce(t, h, fr, ids)
			for _, r := range allRecords(h, ids) {
				require.Equal(t, 1, r.Attempts, "the refused batch cost no attempt")
			}
			st, err := h.ob.Status(context.Background())
			require.NoError(t, err)
			require.NotNil(t, st.LastError)
			require.Equal(t, outbox.CodeBatchUnsupported, st.LastError.Code)
			// From then on this Outbox sends one by one.
			h.enqueue(outbox.Op{OperationType: "comment", EntityID: "z", Payload: []byte("z")})
			drain(t, h)
			require.Len(t, fr.batches, 1)
			require.Len(t, fr.singles, 7)
		})
	}
}

func fixed(resp outbox.Response) func(*fakeReceiver) func(int, []wire.BatchMutation) (outbox.Response, bool) {
	return func(*fakeReceiver) func(int, []wire.BatchMutation) (outbox.Response, bool) {
		return func(int, []wire.BatchMutation) (outbox.Response, bool) { return resp, true }
	}
}
