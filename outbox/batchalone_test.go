package outbox_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// A payload that is not UTF-8 (a Uint8Array body) would reach the receiver
// altered inside a batch (wire.BatchSafe): such a record, inline or in the
// blob store, is sent alone with its very bytes, in its entity's order;
// the others are still batched.
func TestBatchSendsNonUTF8PayloadsAlone(t *testing.T) {
	h, fr := batchHarness(t, func(c *outbox.Config) { c.InlineLimit = 16 })
	put := func(entity, p string) queue.EnqueueResult {
		return h.enqueue(outbox.Op{OperationType: "comment", EntityType: "n", EntityID: entity, Payload: []byte(p)})
	}
	first, bad, last := put("1", `1`), put("1", "\xff\xfe"), put("1", `2`)
	other := put("2", `3`)
	blob := put("3", "binary in the blob store: \xff\x00\x80")
	require.NotEmpty(t, h.get(blob.ID).PayloadRef)
	rep := drain(t, h)
	require.Equal(t, 5, rep.Acked)
	require.ElementsMatch(t, []string{keyOf(h, bad.ID), keyOf(h, blob.ID)}, fr.singles)
	for _, b := range fr.batches {
		for _, m := range b {
			require.True(t, wire.BatchSafe(m.Payload), "%q went in a batch", m.Payload)
		}
	}
	require.Len(t, fr.effects, 5)
	for k, n := range fr.effects {
		require.Equal(t, 1, n, "key %s", k)
	}
	var n1 []string
	for _, id := range fr.order {
		if id == first.ID || id == bad.ID || id == last.ID {
			n1 = append(n1, id)
		}
	}
	require.Equal(t, []string{first.ID, bad.ID, last.ID}, n1, "the entity's order holds")
	bodies := map[string]string{}
	for _, r := range h.sent() {
		if r.RecordID != "" {
			bodies[r.RecordID] = string(r.Body)
		}
	}
	require.Equal(t, "\xff\xfe", bodies[bad.ID])
	require.Equal(t, "binary in the blob store: \xff\x00\x80", bodies[blob.ID])
	for _, id := range []string{first.ID, bad.ID, last.ID, other.ID, blob.ID} {
		require.Equal(t, 1, h.get(id).Attempts, "one attempt each")
	}
	st, err := h.ob.Status(t.Context())
	require.NoError(t, err)
	require.Nil(t, st.LastError, "sending alone is no fallback")
}

// A 413 to a page of one record: the record, not the page, may be too
// large. It is sent alone, its 413 answered as a single send's (terminal,
// one attempt); the other records, and later flushes, are still batched.
func TestBatchTooLargeSingleRecordSentAlone(t *testing.T) {
	h, fr := batchHarness(t, nil)
	const limit = 64
	fr.whole = func(_ int, ms []wire.BatchMutation) (outbox.Response, bool) {
		for _, m := range ms {
			if len(m.Payload) > limit {
				return outbox.Response{Status: 413, Body: []byte(`{"type":"` + wire.ProblemBatchTooLarge + `"}`)}, true
			}
		}
		return outbox.Response{}, false
	}
	fr.handle = func(m wire.BatchMutation) wire.BatchResult {
		if len(m.Payload) > limit {
			return wire.BatchResult{Status: 413, Body: []byte(`{"title":"payload too large"}`)}
		}
		return wire.BatchResult{}
	}
	big := h.enqueue(outbox.Op{OperationType: "comment", EntityType: "n", EntityID: "big", Payload: []byte(`"` + strings.Repeat("x", 2*limit) + `"`)})
	ids := enqueueEntities(h, 3, 2)
	rep := drain(t, h)
	require.Equal(t, 6, rep.Acked)
	require.Equal(t, 1, rep.Terminal)
	require.Equal(t, []string{keyOf(h, big.ID)}, fr.singles, "only the large record goes alone")
	r := h.get(big.ID)
	require.Equal(t, queue.StatusTerminalFailed, r.Status)
	require.Equal(t, 413, r.LastError.Status)
	require.Equal(t, 1, r.Attempts)
	requireAllAckedOnce(t, h, fr, ids)
	st, err := h.ob.Status(t.Context())
	require.NoError(t, err)
	require.True(t, st.LastError == nil || st.LastError.Code != outbox.CodeBatchUnsupported, "no fallback to single sends")
	more := enqueueEntities(h, 1, 2)
	n := len(fr.batches)
	drain(t, h)
	require.Greater(t, len(fr.batches), n, "later records are still batched")
	require.Len(t, fr.singles, 1)
	for _, r := range allRecords(h, more) {
		require.Equal(t, queue.StatusAcked, r.Status)
	}
}
