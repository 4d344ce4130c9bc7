package sim

import (
	"context"
	"errors"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// Attempt accounting: an answer that is not the record's fault (not
// attempted in a batch, a batch refused whole as too large, stale, by an
// old server, 401, 403 session mismatch, offline) refunds the attempt it
// was charged. So a record whose every earlier send was answered so, and
// that no tab left charged (a crash, an expired lease), is sent with
// exactly one attempt spent: checkAttempts checks that at each send;
// noteCharges and noteRecovered mark the records for which it no longer
// holds.

// sentIDs is the records a request carries.
func sentIDs(req outbox.Request) []string {
	if req.RecordID != "" {
		return []string{req.RecordID}
	}
	ms, _ := wire.ParseBatchRequest(req.Body, 1<<20)
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.OperationID
	}
	return ids
}

// checkAttempts: each record req carries that was refunded at every
// earlier send has one attempt charged, this one.
func (w *World) checkAttempts(req outbox.Request) {
	for _, id := range sentIDs(req) {
		if w.charged[id] {
			continue
		}
		r, err := w.store.Get(context.Background(), id)
		if err == nil && r.Attempts != 1 {
			w.violation("%s sent with %d attempts charged; every earlier send of it was refunded", id, r.Attempts)
		}
		if w.sentBefore[id] {
			w.stats.RefundsChecked++
		}
		w.sentBefore[id] = true
	}
}

// noteCharges marks the records of req whose attempt the answer the tab
// got leaves charged.
func (w *World) noteCharges(req outbox.Request, resp outbox.Response, err error) {
	ids := sentIDs(req)
	if err != nil {
		if !errors.Is(err, outbox.ErrOffline) {
			w.markCharged(ids...)
		}
		return
	}
	switch s := resp.Status; {
	case s == 401, s == 403,
		s == 409 && resp.Header.Get(wire.HeaderFencingHighest) != "":
		return // refunded
	case req.Endpoint != w.srv.BatchEndpoint:
		w.markCharged(ids...)
		return
	case s == 413 || s == 404 || s == 200 && !resultsValid(req, resp):
		return // refunded: too large, or the server does not speak the format
	case s != 200:
		w.markCharged(ids...)
		return
	}
	ms, _ := wire.ParseBatchRequest(req.Body, 1<<20)
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.Key
	}
	rs, _ := wire.ParseBatchResponse(resp.Body, keys)
	for i, r := range rs {
		if r.Outcome != wire.BatchNotAttempted {
			w.markCharged(ids[i])
		}
	}
}

// noteRecovered marks, before a claim, the records it may recover:
// sending under a lease that expired or an older token (a crashed, frozen
// or slow tab's): that attempt stays charged.
func (w *World) noteRecovered(ctx context.Context, req queue.ClaimRequest) {
	sending, _ := w.store.List(ctx, outbox.Filter{Statuses: []queue.Status{queue.StatusSending}})
	for i := range sending {
		if r := &sending[i]; r.LeaseToken != req.Lease.Token || queue.LeaseExpired(r, req.Now) {
			w.markCharged(r.ID)
		}
	}
}

func (w *World) markCharged(ids ...string) {
	for _, id := range ids {
		w.charged[id] = true
	}
}
