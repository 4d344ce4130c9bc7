package sim

import (
	"context"
	"errors"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// errCrashed is what a dead tab's code sees from every store or network call
// after its crash point: nothing it does afterwards reaches shared state.
var errCrashed = errors.New("sim: tab crashed")

// errNetwork is a request or response lost on the network.
var errNetwork = errors.New("sim: network error")

// Tab is one simulated browser tab. Its flush runs as a coroutine
// (iter.Pull) that yields to the world before every store call and around
// every network round trip, so tabs interleave, freeze and crash at exactly
// those points, in an order chosen by the seed. Only one coroutine ever runs
// at a time: the simulation is single-threaded and deterministic.
type Tab struct {
	w      *World
	idx    int
	gen    int
	owner  string
	ob     *outbox.Outbox
	alive  bool
	killed bool // crashed mid-flush: every later call fails

	flushing bool
	inCoro   bool
	yield    func(struct{}) bool
	next     func() (struct{}, bool)
	stop     func()
	lease    queue.Lease
	frozen   bool
	thawAt   int64 // virtual ms
	// noBatch: this Outbox was told the server has no batch route (404,
	// or a 200 that is no results document): it must send one by one from
	// then on.
	noBatch bool
	// pageMax is the most mutations this Outbox may put in a batch:
	// Config.BatchMax, halved by each 413 it was answered.
	pageMax int
	sends   int // Transport.Send calls of the current flush
}

// step is a yield point: the world may run other tabs, advance time, freeze
// or crash this one before the call goes ahead.
func (t *Tab) step() error {
	if t.killed {
		return errCrashed
	}
	if !t.inCoro {
		return nil
	}
	if !t.yield(struct{}{}) {
		t.killed = true
		return errCrashed
	}
	if t.killed {
		return errCrashed
	}
	return nil
}

// tabStore routes a tab's store calls through its yield points.
type tabStore struct{ t *Tab }

func (s tabStore) Enqueue(ctx context.Context, req queue.EnqueueRequest) (queue.EnqueueResult, error) {
	if err := s.t.step(); err != nil {
		return queue.EnqueueResult{}, err
	}
	return s.t.w.store.Enqueue(ctx, req)
}

func (s tabStore) Claim(ctx context.Context, req queue.ClaimRequest) ([]queue.Record, error) {
	if err := s.t.step(); err != nil {
		return nil, err
	}
	s.t.w.noteRecovered(ctx, req)
	return s.t.w.store.Claim(ctx, req)
}

func (s tabStore) UpdateBatch(ctx context.Context, l queue.Lease, ups []outbox.RecordUpdate) ([]outbox.UpdateResult, error) {
	if err := s.t.step(); err != nil {
		return nil, err
	}
	return s.t.w.store.UpdateBatch(ctx, l, ups)
}

func (s tabStore) Amend(ctx context.Context, id string, fn func(*queue.Record) error) (queue.Record, error) {
	if err := s.t.step(); err != nil {
		return queue.Record{}, err
	}
	return s.t.w.store.Amend(ctx, id, fn)
}

func (s tabStore) Delete(ctx context.Context, f outbox.Filter) (int, error) {
	if err := s.t.step(); err != nil {
		return 0, err
	}
	return s.t.w.store.Delete(ctx, f)
}

func (s tabStore) Get(ctx context.Context, id string) (queue.Record, error) {
	if err := s.t.step(); err != nil {
		return queue.Record{}, err
	}
	return s.t.w.store.Get(ctx, id)
}

func (s tabStore) List(ctx context.Context, f outbox.Filter) ([]queue.Record, error) {
	if err := s.t.step(); err != nil {
		return nil, err
	}
	return s.t.w.store.List(ctx, f)
}

func (s tabStore) Payload(ctx context.Context, ref string) ([]byte, error) {
	if err := s.t.step(); err != nil {
		return nil, err
	}
	return s.t.w.store.Payload(ctx, ref)
}

func (s tabStore) Status(ctx context.Context) (outbox.Projection, error) {
	if err := s.t.step(); err != nil {
		return outbox.Projection{}, err
	}
	return s.t.w.store.Status(ctx)
}

func (s tabStore) GetLease(ctx context.Context, name string) (queue.Lease, bool, error) {
	if err := s.t.step(); err != nil {
		return queue.Lease{}, false, err
	}
	return s.t.w.store.GetLease(ctx, name)
}

func (s tabStore) UpdateLease(ctx context.Context, name string, fn func(queue.Lease, bool) (queue.Lease, error)) (queue.Lease, error) {
	if err := s.t.step(); err != nil {
		return queue.Lease{}, err
	}
	l, err := s.t.w.store.UpdateLease(ctx, name, fn)
	if err == nil && l.Token > s.t.w.maxToken {
		s.t.w.maxToken = l.Token
	}
	return l, err
}

func (s tabStore) UpdateMeta(ctx context.Context, fn func(*outbox.Meta) error) (outbox.Meta, error) {
	if err := s.t.step(); err != nil {
		return outbox.Meta{}, err
	}
	return s.t.w.store.UpdateMeta(ctx, fn)
}

// tabTransport is the lossy, slow, duplicating network between a tab and the
// server. Credentials are the browser's (a cookie), whichever tab sends:
// the user the world last logged in, attached at send time.
type tabTransport struct{ t *Tab }

func (n tabTransport) Send(ctx context.Context, req outbox.Request) (outbox.Response, error) {
	n.t.w.checkAttempts(req)
	resp, err := n.send(ctx, req)
	n.t.w.noteCharges(req, resp, err)
	return resp, err
}

func (n tabTransport) send(_ context.Context, req outbox.Request) (outbox.Response, error) {
	t, w := n.t, n.t.w
	user := w.user
	t.sends++
	isBatch := req.Endpoint == w.srv.BatchEndpoint
	if isBatch {
		if t.noBatch {
			w.violation("%s sent a batch after the server answered one with 404 or a broken results document", t.owner)
		}
		if n := batchLen(req); n > t.pageMax {
			w.violation("%s sent a batch of %d mutations, more than its limit %d", t.owner, n, t.pageMax)
		}
	}
	if err := t.step(); err != nil { // request on the wire
		if w.chance(0.5) { // the tab died, its request still arrives
			w.deliver(user, req)
			w.tracef("%s orphan request %s delivered", t.owner, describe(req))
		} else if isBatch {
			w.stats.ClientBatchCrashes++ // charged, never sent
			w.tracef("%s died before sending %s", t.owner, describe(req))
		}
		return outbox.Response{}, err
	}
	if w.offline {
		if w.chance(0.2) { // it left just as the network dropped: the answer is lost
			w.deliver(user, req)
			w.tracef("%s request %s delivered, then offline", t.owner, describe(req))
		}
		w.tracef("%s request %s: offline", t.owner, describe(req))
		w.stats.Offline++
		return outbox.Response{}, errors.Join(outbox.ErrOffline, errNetwork)
	}
	if w.chance(w.pDropBefore) {
		w.tracef("%s request %s dropped before server", t.owner, describe(req))
		return outbox.Response{}, errNetwork
	}
	resp, answered := w.deliver(user, req)
	if w.chance(w.pDup) { // the browser resends on a new connection
		resp, answered = w.deliver(user, req)
		w.tracef("%s request %s duplicated", t.owner, describe(req))
		if isBatch {
			w.stats.BatchDup++
		}
	}
	if !answered {
		return outbox.Response{}, errNetwork
	}
	w.tracef("%s sent %s tok=%s -> %d%s", t.owner, describe(req), req.Header.Get("X-Client-Fencing-Token"), resp.Status, outcomesOf(req, resp))
	if err := t.step(); err != nil { // response on the wire
		w.tracef("%s died after server answered %s", t.owner, describe(req))
		return outbox.Response{}, err
	}
	if w.chance(w.pDropAfter) {
		w.tracef("%s response for %s lost", t.owner, describe(req))
		if isBatch {
			w.stats.BatchLost++
		}
		return outbox.Response{}, errNetwork
	}
	switch {
	case isBatch && (resp.Status == 404 || resp.Status == 200 && !resultsValid(req, resp)):
		t.noBatch = true // the server does not speak the format
	case isBatch && resp.Status == 413:
		t.pageMax = max(1, t.pageMax/2)
	}
	return resp, nil
}
