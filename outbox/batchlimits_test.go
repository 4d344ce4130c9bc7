package outbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// The browser transport refuses answers over its cap (1 MiB) with
// ErrResponseTooLarge. 100 answers of 20 KiB in one batch answer are 2 MiB:
// the page is halved until the answers fit, every record acked once, none
// charged for the refusals, none a dead letter.
func TestBatchAnswerTooLargeHalvesPages(t *testing.T) {
	h, fr := batchHarness(t, nil)
	big := `{"doc":"` + strings.Repeat("x", 20<<10) + `"}`
	fr.handle = func(wire.BatchMutation) wire.BatchResult { return wire.BatchResult{Status: 201, Body: []byte(big)} }
	h.reply = func(req outbox.Request) (outbox.Response, error) {
		resp, err := fr.serve(req)
		if err == nil && len(resp.Body) > 1<<20 {
			return outbox.Response{}, outbox.ErrResponseTooLarge
		}
		return resp, err
	}
	ids := enqueueEntities(h, 100, 1)
	for i := 0; i < 12; i++ {
		_, _ = h.ob.Flush(t.Context(), h.lease("A"))
		h.clock.Add(time.Hour)
	}
	for _, l := range ids {
		rec := h.get(l[0])
		require.Equal(t, queue.StatusAcked, rec.Status, "%s: %+v", rec.ID, rec.LastError)
		require.Equal(t, 1, rec.Attempts, "a refused answer is not charged")
	}
	require.Len(t, fr.effects, 100)
	for _, n := range fr.sizes()[1:] {
		require.LessOrEqual(t, n, 50, "pages halved after the first refusal: %v", fr.sizes())
	}
}

// Pages are cut by bytes too: 12 records of 100 KiB in one entity go in
// requests of at most BatchMaxBytes (default 512 KiB, under the receiver's
// 1 MiB body limit), in order; a record larger than that alone goes by the
// single path, in its entity's order.
func TestBatchPagesCutByBytes(t *testing.T) {
	h, fr := batchHarness(t, nil)
	var ids []string
	for i := 0; i < 13; i++ {
		n := 100 << 10
		if i == 6 {
			n = 600 << 10
		}
		r := h.enqueue(outbox.Op{OperationType: "comment", EntityType: "note", EntityID: "e", Payload: []byte(`"` + strings.Repeat("x", n) + `"`)})
		ids = append(ids, r.ID)
	}
	drain(t, h)
	requireAllAckedOnce(t, h, fr, map[string][]string{"note:e": ids})
	for _, req := range h.sent() {
		if req.Endpoint == batchRoute {
			require.LessOrEqual(t, len(req.Body), 512<<10)
		}
	}
	require.Len(t, fr.singles, 1, "the 600 KiB record alone")
	require.Equal(t, ids, fr.order)
}

// resolving is a Transport with a base URL of a path prefix, as
// fetch.Transport{BaseURL: "https://app.example/app"} sends.
type resolving struct {
	outbox.Transport
	base string
}

func (r resolving) Resolve(ep string) string { return wire.ResolveEndpoint(r.base, ep) }

// Behind a Transport whose base has a path prefix, a mutation names the
// path its single request reaches (/app/api/commands), so a record sent
// alone and then in a batch under its key is one mutation to the receiver.
func TestBatchEndpointResolvedByTransport(t *testing.T) {
	h, fr := batchHarness(t, func(c *outbox.Config) {
		c.Transport = resolving{Transport: c.Transport, base: "https://app.example/app"}
	})
	ids := enqueueEntities(h, 2, 2)
	drain(t, h)
	requireAllAckedOnce(t, h, fr, ids)
	require.Len(t, fr.batches, 1)
	for _, m := range fr.batches[0] {
		require.Equal(t, "/app/api/commands", m.Endpoint)
	}
}
