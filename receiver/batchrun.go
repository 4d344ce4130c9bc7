package receiver

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/tabfence/tabfence/wire"
)

// maxSavepoints is how many mutations one transaction of a batch runs
// (each that runs under a savepoint): PostgreSQL caches 64 subtransactions per transaction
// and slows every reader of the table past that, so a longer batch is run
// in several transactions.
const maxSavepoints = 64

// savepointSQL is the savepoint statements of one place in a chunk.
type savepointSQL struct{ open, rollback, release string }

// savepointAt holds the statements of the savepoint of each place in a
// chunk, one name per place, so no statement text is built per mutation.
var savepointAt = func() (sps [maxSavepoints]savepointSQL) {
	for i := range sps {
		name := "tabfence_m" + strconv.Itoa(i)
		sps[i] = savepointSQL{"SAVEPOINT " + name, "ROLLBACK TO SAVEPOINT " + name, "RELEASE SAVEPOINT " + name}
	}
	return sps
}()

// batchRun is one admitted batch being run: its results so far, the
// entities stopped by a mutation that did not succeed, and the bytes its
// answer document has reached.
type batchRun struct {
	rc      *Receiver
	b       batch
	h       Handler
	log     *slog.Logger
	results []wire.BatchResult
	stopped map[string]bool
	size    int64  // bytes of the results document so far
	scratch []byte // encodes one result, to measure it
	kept    []kept // the current chunk's answers to store
	claimID string // the current chunk's claim on its keys
}

// runBatch runs the batch's mutations and commits them, in one
// transaction per maxSavepoints mutations. An error means nothing
// of the batch was stored (or, wrapping errCommitUnknown, that the
// commit's outcome is unknown); a later transaction's failure answers its
// mutations and the rest retry, the earlier ones staying committed.
func (rc *Receiver) runBatch(ctx context.Context, b batch, h Handler, log *slog.Logger) ([]wire.BatchResult, error) {
	run := &batchRun{rc: rc, b: b, h: h, log: log, results: make([]wire.BatchResult, len(b.ms)), stopped: map[string]bool{}}
	for start := 0; start < len(b.ms); {
		next, err := run.chunk(ctx, start)
		if err != nil && start == 0 {
			return nil, err
		}
		if err != nil {
			v := errorVerdict(log, err)
			for i := start; i < len(b.ms); i++ {
				run.results[i] = v.result(b.ms[i].Key)
			}
			return run.results, nil
		}
		start = next
	}
	return run.results, nil
}

// chunk runs the maxSavepoints mutations from start (fewer at the end)
// in one transaction, their new keys claimed up front (claimAll), and
// commits it; next is the first mutation left for another transaction.
func (run *batchRun) chunk(ctx context.Context, start int) (next int, err error) {
	rc, b := run.rc, run.b
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
	ms := b.ms[start:end]
	fps := make([]string, len(ms))
	for i, m := range ms {
		fps[i] = mutationFingerprint(b.scope, m)
	}
	run.claimID = newClaimID()
	claimed, err := rc.claimAll(ctx, tx, b.scope, run.claimID, ms, fps)
	if err != nil {
		return 0, err
	}
	run.kept = run.kept[:0]
	for i, m := range ms {
		v, err := run.mutation(ctx, tx, m, fps[i], claimed[m.Key], i)
		if err != nil {
			return 0, err
		}
		run.answer(start+i, v)
	}
	if err := rc.finishAll(ctx, tx, b.scope, run.claimID, run.kept); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("%w: %w", errCommitUnknown, err)
	}
	committed = true
	return end, nil
}

// mutation answers one mutation of the batch in tx: not attempted after a
// failure of its entity, out of time or of answer room, else claimed,
// replayed or run. fp is its fingerprint, claimed whether claimAll took
// its key, at its place in the chunk. An error means tx is unusable and the batch fails.
func (run *batchRun) mutation(ctx context.Context, tx Tx, m wire.BatchMutation, fp string, claimed bool, at int) (verdict, error) {
	rc := run.rc
	var v verdict
	switch {
	case m.Entity != "" && run.stopped[m.Entity]:
		v = verdict{outcome: wire.BatchNotAttempted}
	case rc.budgetSpent(ctx):
		v = problemVerdict(wire.BatchRetry, probBatchDeadline, 0)
	case run.size >= rc.opts.MaxBatchResponse:
		v = problemVerdict(wire.BatchRetry, probBatchFull, 0)
	default:
		return rc.runMutation(ctx, tx, run, m, fp, claimed, at)
	}
	if claimed { // claimed up front, not run: free the key
		if _, err := tx.Exec(ctx, deleteClaim, run.b.scope, m.Key, run.claimID); err != nil {
			return verdict{}, err
		}
	}
	return v, nil
}

// answer records mutation i's verdict; one that did not succeed stops
// the later mutations of its entity.
func (run *batchRun) answer(i int, v verdict) {
	r := v.result(run.b.ms[i].Key)
	run.results[i] = r
	run.size += run.sizeOf(r)
	if !succeeded(r) {
		run.stopped[run.b.ms[i].Entity] = true
	}
}

// sizeOf is r's length in the results document.
func (run *batchRun) sizeOf(r wire.BatchResult) int64 {
	run.scratch = wire.AppendBatchResult(run.scratch[:0], r)
	return int64(len(run.scratch)) + 1 // and its comma
}

// fits reports whether v's answer still fits the batch's answer
// (Options.MaxBatchResponse); the first answer always does, so every batch
// makes progress.
func (run *batchRun) fits(key string, v verdict) bool {
	return run.size == 0 || run.size+run.sizeOf(v.result(key)) <= run.rc.opts.MaxBatchResponse
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
// keeps it (no other copy of the batch can claim the key meanwhile); a 5xx,
// an error, or an answer that does not fit the batch's answer rolls back to
// the savepoint and deletes the claim. A stored answer is kept for the
// chunk's finishAll, and its savepoint left open (releasing it would cost a
// statement and change nothing, the transaction commits them all), so a
// mutation that runs costs its SAVEPOINT and its handler's statements. Each
// mutation of a chunk names its savepoint by its place (savepointAt): a
// rollback reaches its own savepoint or fails, taking the chunk with it,
// never an earlier mutation's whose answer is kept. An error means tx is
// unusable and the batch fails. Every key of a chunk is claimed under the
// chunk's one claim id; claimed says claimAll took this one.
func (rc *Receiver) runMutation(ctx context.Context, tx Tx, run *batchRun, m wire.BatchMutation, fp string, claimed bool, at int) (verdict, error) {
	b, claimID := run.b, run.claimID
	req := &Request{HTTP: b.http, Scope: b.scope, Key: m.Key, Body: m.Payload, Resource: b.resource, Token: b.token,
		OperationID: operationID(m.OperationID), Operation: m.Operation, Entity: m.Entity, Endpoint: m.Endpoint}
	if !claimed { // the key has a record
		outcome, rec, err := rc.claimIn(ctx, tx, req.Scope, req.Key, fp, claimID)
		if err != nil {
			return verdict{}, err
		}
		if v, answered := rc.unrun(outcome, rec); answered {
			if !run.fits(m.Key, v) {
				v = problemVerdict(wire.BatchRetry, probBatchFull, 0)
			}
			return v, nil
		}
	}
	sp := savepointAt[at]
	if _, err := tx.Exec(ctx, sp.open); err != nil {
		return verdict{}, err
	}
	open := true
	rollback := func() error { // to the savepoint, once, and out of it
		if !open {
			return nil
		}
		open = false
		if _, err := tx.Exec(ctx, sp.rollback); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sp.release)
		return err
	}
	var answer Response
	resp, stored, err := rc.runHandler(ctx, tx, req, run.h, rollback, func(r Response) error { answer = r; return nil })
	var v verdict
	if err != nil {
		v = errorVerdict(run.log.With("key", m.Key, "op", req.OperationID), err)
	} else {
		v = rc.handlerVerdict(resp, stored)
	}
	if stored && !run.fits(m.Key, v) {
		stored, v = false, problemVerdict(wire.BatchRetry, probBatchFull, 0)
	}
	if !stored {
		if err := rollback(); err != nil {
			return verdict{}, err
		}
		if _, err := tx.Exec(ctx, deleteClaim, req.Scope, req.Key, claimID); err != nil {
			return verdict{}, err
		}
		return v, nil
	}
	run.kept = append(run.kept, kept{key: m.Key, fp: fp, status: int64(answer.Status),
		header: rc.storedHeader(answer), body: storedBody(answer)})
	return v, nil
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
