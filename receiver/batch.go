package receiver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

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
// fence is checked once, before any mutation: a stale token refuses the
// whole batch with 409 as it refuses a request. The work is bounded by
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
	if err != nil {
		return errorVerdict(log, err).response()
	}
	hd := http.Header{}
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	return Response{Status: http.StatusOK, Header: hd, Body: wire.AppendBatchResponse(nil, results)}
}

// maxSavepoints is how many mutations one transaction of a batch runs
// (each that runs under a savepoint): PostgreSQL caches 64 subtransactions per transaction
// and slows every reader of the table past that, so a longer batch is run
// in several transactions.
const maxSavepoints = 64

// runBatch runs the batch's mutations and commits them, in one
// transaction per maxSavepoints mutations. An error means nothing
// of the batch was stored (or, wrapping errCommitUnknown, that the
// commit's outcome is unknown); a later transaction's failure answers its
// mutations and the rest retry, the earlier ones staying committed.
func (rc *Receiver) runBatch(ctx context.Context, b batch, h Handler, log *slog.Logger) ([]wire.BatchResult, error) {
	results := make([]wire.BatchResult, len(b.ms))
	stopped := map[string]bool{} // entities with a mutation that did not succeed
	for start := 0; start < len(b.ms); {
		next, err := rc.runChunk(ctx, b, h, log, start, results, stopped)
		if err != nil && start == 0 {
			return nil, err
		}
		if err != nil {
			v := errorVerdict(log, err)
			for i := start; i < len(b.ms); i++ {
				results[i] = v.result(b.ms[i].Key)
			}
			return results, nil
		}
		start = next
	}
	return results, nil
}

// runChunk runs the maxSavepoints mutations from start (fewer at the end)
// in one transaction, their new keys claimed up front (claimAll), and
// commits it; next is the first mutation left for another transaction.
func (rc *Receiver) runChunk(ctx context.Context, b batch, h Handler, log *slog.Logger, start int, results []wire.BatchResult, stopped map[string]bool) (next int, err error) {
	tx, err := rc.store.Begin(ctx)
	if err != nil {
		return 0, err
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	if b.resource != "" {
		if err := rc.checkFence(ctx, tx, b.scope, b.resource, b.token); err != nil {
			return 0, err
		}
	}
	end := min(start+maxSavepoints, len(b.ms))
	claims, err := rc.claimAll(ctx, tx, b.scope, b.ms[start:end])
	if err != nil {
		return 0, err
	}
	for i := start; i < end; i++ {
		m := b.ms[i]
		switch {
		case m.Entity != "" && stopped[m.Entity]:
			results[i] = wire.BatchResult{Key: m.Key, Outcome: wire.BatchNotAttempted}
		case rc.budgetSpent(ctx):
			results[i] = problemVerdict(wire.BatchRetry, probBatchDeadline, 0).result(m.Key)
			stopped[m.Entity] = true
		default:
			v, err := rc.runMutation(ctx, tx, b, m, claims[m.Key], h, log)
			if err != nil {
				return 0, err
			}
			results[i] = v.result(m.Key)
			delete(claims, m.Key) // used
			if !succeeded(results[i]) {
				stopped[m.Entity] = true
			}
			continue
		}
		if id, ok := claims[m.Key]; ok { // claimed up front, not run: free the key
			if _, err := tx.Exec(ctx, deleteClaim, b.scope, m.Key, id); err != nil {
				return 0, err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("%w: %w", errCommitUnknown, err)
	}
	committed = true
	return end, nil
}

// budgetSpent reports whether the batch's time is so nearly up (less than a
// quarter of Options.Timeout left) that no further mutation may start: the
// ones run so far are committed and the rest answered retry, so a batch
// longer than Timeout makes progress on each resend instead of rolling back
// whole every time.
func (rc *Receiver) budgetSpent(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ok && time.Until(deadline) < rc.opts.Timeout/4
}

// succeeded reports whether a mutation's later mutations of its entity may
// run: it was applied now or before with a 2xx. A replayed 4xx stops them
// as its first answer did, so a batch resent after a lost response is
// answered as it was the first time.
func succeeded(r wire.BatchResult) bool {
	return (r.Outcome == wire.BatchApplied || r.Outcome == wire.BatchReplayed) && r.Status >= 200 && r.Status < 300
}

// runMutation claims, replays or runs one mutation in tx. The claim is
// taken before the mutation's savepoint, so rolling back a 4xx's writes
// keeps it (no other copy of the batch can claim the key meanwhile); a 5xx
// or error rolls back to the savepoint and deletes the claim. An error
// means tx is unusable and the batch fails. claimID is the key's claim
// when claimAll took it, else "".
func (rc *Receiver) runMutation(ctx context.Context, tx Tx, b batch, m wire.BatchMutation, claimID string, h Handler, log *slog.Logger) (verdict, error) {
	req := &Request{HTTP: b.http, Scope: b.scope, Key: m.Key, Body: m.Payload, Resource: b.resource, Token: b.token,
		OperationID: operationID(m.OperationID), Operation: m.Operation, Entity: m.Entity, Endpoint: m.Endpoint}
	log = log.With("key", m.Key, "op", req.OperationID)
	if claimID == "" { // not claimed up front: the key has a record
		claimID = newClaimID()
		outcome, rec, err := rc.claimIn(ctx, tx, req.Scope, req.Key, mutationFingerprint(b.scope, m), claimID)
		if err != nil {
			return verdict{}, err
		}
		if v, answered := rc.unrun(outcome, rec); answered {
			return v, nil
		}
	}
	if _, err := tx.Exec(ctx, `SAVEPOINT tabfence_mutation`); err != nil {
		return verdict{}, err
	}
	resp, stored, err := rc.runHandler(ctx, tx, req, claimID, h, func() error {
		_, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT tabfence_mutation`)
		return err
	})
	if !stored {
		if err := rc.undoMutation(ctx, tx, req, claimID); err != nil {
			return verdict{}, err
		}
	}
	if _, err := tx.Exec(ctx, `RELEASE SAVEPOINT tabfence_mutation`); err != nil {
		return verdict{}, err
	}
	if err != nil {
		return errorVerdict(log, err), nil
	}
	return rc.handlerVerdict(resp, stored), nil
}

// handlerVerdict answers a mutation by its handler's answer: applied (2xx)
// or rejected (4xx) when stored, else (a 5xx) retry after the handler's
// Retry-After, if any.
func (rc *Receiver) handlerVerdict(resp Response, stored bool) verdict {
	v := verdict{resp: resp}
	switch {
	case !stored:
		v.outcome = wire.BatchRetry
		v.retryAfter, _ = wire.ParseRetryAfter(resp.Header.Get(wire.HeaderRetryAfter), rc.now())
	case resp.Status >= 400:
		v.outcome = wire.BatchRejected
	default:
		v.outcome = wire.BatchApplied
	}
	v.resp.Header = nil // a batch's results carry no headers
	return v
}

// undoMutation drops what a mutation that is not stored wrote: its writes
// (back to its savepoint) and its claim, so a retry runs it again.
func (rc *Receiver) undoMutation(ctx context.Context, tx Tx, req *Request, claimID string) error {
	if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT tabfence_mutation`); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, deleteClaim, req.Scope, req.Key, claimID)
	return err
}
