package receiver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/tabfence/tabfence/wire"
)

// HandleBatch wraps h as an http.Handler for POSTs of many mutations at
// once (wire.ParseBatchRequest's document), each with its own idempotency
// key, each run as Handle would run it alone: h sees a Request per mutation
// (Body the payload, Operation and Entity set, the batch's Resource and
// Token). The answer is 200 with a result per mutation, in order
// (wire.AppendBatchResponse), whenever the batch was processed.
//
// The batch runs in one database transaction (one per maxSavepoints
// mutations), each mutation that runs under its own savepoint: a
// 2xx or 4xx answer is stored with its writes, a 5xx, error or panic rolls
// back to the savepoint (nothing of it stays) and answers retry.
// A mutation that does not succeed stops the later mutations of its Entity
// in the batch (not-attempted, nothing stored); other entities go on. The
// fence is checked in each transaction (one per 64 mutations) before its
// mutations: a stale token refuses the whole batch with 409 as it refuses
// a request; one gone stale after a committed transaction answers the
// later mutations retry with the same problem. The work is bounded by
// Options.Timeout: near it no further mutation starts (see budgetSpent).
// The mutations are bounded by Options.MaxBatch and the body by MaxBody
// (413).
func (rc *Receiver) HandleBatch(h Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.serveBatch(w, r, h)
	})
}

// batch is an admitted batch request.
type batch struct {
	http     *http.Request
	scope    string
	path     string // the batch's route, for the log
	resource string
	token    uint64
	ms       []wire.BatchMutation
}

func (rc *Receiver) serveBatch(w http.ResponseWriter, r *http.Request, h Handler) {
	rc.armBodyDeadline(w, r)
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		writeProblem(w, probMethod)
		return
	}
	scope, ok := rc.authenticate(w, r)
	if !ok {
		return
	}
	resource, token, err := parseFence(r.Header)
	if err != nil {
		writeProblem(w, headerProblem(err))
		return
	}
	body, release, bp := rc.readBody(w, r)
	if bp != nil {
		writeBodyProblem(w, *bp)
		return
	}
	defer release()
	disarmBodyDeadline(w)
	ms, err := wire.ParseBatchRequest(body, rc.opts.MaxBatch)
	switch {
	case errors.Is(err, wire.ErrBatchTooLarge):
		p := probBatchTooLarge
		p.Detail = fmt.Sprintf("A batch carries at most %d mutations; nothing was stored. Send fewer at once.", rc.opts.MaxBatch)
		writeProblem(w, p)
		return
	case err != nil:
		writeProblem(w, probBatchMalformed)
		return
	}
	b := batch{http: r, scope: scope, path: r.URL.Path, resource: resource, token: token, ms: ms}
	writeResponse(w, rc.applyBatch(r.Context(), b, h))
}

// applyBatch runs an admitted batch and answers it: the results document,
// or the problem that refused the whole batch.
func (rc *Receiver) applyBatch(ctx context.Context, b batch, h Handler) Response {
	// Detached from the client's connection, as apply is.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rc.opts.Timeout)
	defer cancel()
	log := rc.log.With("target", b.path, "batch", len(b.ms))
	if b.resource != "" {
		// A stale leader's batch is refused without a write (see claim).
		var rejection error
		err := rc.store.View(ctx, func(q Tx) error {
			var err error
			rejection, err = precheckFence(ctx, q, b.scope, b.resource, b.token)
			return err
		})
		if err == nil {
			err = rejection
		}
		if err != nil {
			return errorVerdict(log, err).response()
		}
	}
	results, err := rc.runBatch(ctx, b, h, log)
	if errors.Is(err, errClaimLost) { // the in-flight 409 is a key's answer, not a batch's
		log.Error("batch claim lost", "err", err)
		return problemVerdict(wire.BatchRetry, probInternal, 0).response()
	}
	if err != nil {
		return errorVerdict(log, err).response()
	}
	hd := http.Header{}
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	return Response{Status: http.StatusOK, Header: hd, Body: wire.AppendBatchResponse(nil, results)}
}
