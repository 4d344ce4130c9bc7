package outbox_test

import (
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
