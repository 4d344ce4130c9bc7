package sim

import (
	"errors"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// BatchFaults are the server-side faults of one batch, chosen by the world.
// Indexes are 1-based (0: no such fault), into the batch's mutations.
type BatchFaults struct {
	// CrashAt: the server dies while running mutation CrashAt: nothing of
	// the batch is committed and no answer is sent.
	CrashAt int
	// BusyFrom: the batch runs out of time before mutation BusyFrom, which
	// and every later one is answered retry 503 (the receiver's budget
	// rule); the ones run before are committed.
	BusyFrom int
	// TxFailFrom: the batch ran in several transactions (the receiver's
	// 64 mutations each) and the one from mutation TxFailFrom failed: it
	// and every later mutation answer retry 500, whatever their entity;
	// the earlier ones stay committed.
	TxFailFrom int
	// Fail: the handlers of these mutations answer 5xx (retry, not
	// stored), with the Retry-After given (0: none).
	Fail map[int]time.Duration
	// InFlightAt: mutation InFlightAt's key is running elsewhere (retry
	// 409 request-in-flight, 1 s).
	InFlightAt int
}

// batchTx is a batch's transaction: nothing reaches the server's state
// before commit, so a crash mid-batch leaves nothing of it.
type batchTx struct {
	keys    map[string]stored
	effects []Effect
}

// HandleBatch answers a POST of the batch format by the receiver's rules
// (receiver/README.md, the batch rows): the request's refusals as for one
// mutation (401, 403, storms, fencing: a stale token refuses the whole
// batch with 409, finished keys included), 413 batch-too-large over
// MaxBatch, 400 batch-malformed; then each mutation claimed, replayed, or
// run, a key reused for another fingerprint rejected 422 (not stored), and
// a mutation that does not succeed stops the later ones of its entity
// (not-attempted); the whole batch commits at once. answered is false when
// the server crashed (no answer).
func (s *Server) HandleBatch(now time.Time, user string, req outbox.Request, f BatchFaults) (resp outbox.Response, answered bool) {
	if s.NoBatch {
		s.Requests++
		return outbox.Response{Status: 404, Body: []byte("404 page not found")}, true
	}
	if r, ok := s.admit(now, user, req); !ok {
		return r, true
	}
	// The receiver parses the fence headers, then the body, then checks
	// the token against the store.
	if _, err := wire.ParseToken(req.Header.Get(wire.HeaderFencingToken)); err != nil || !wire.ValidResource(req.Header.Get(wire.HeaderResource)) {
		return problem(400, wire.ProblemMalformedToken), true
	}
	if s.MaxBody > 0 && len(req.Body) > s.MaxBody {
		return problem(413, wire.ProblemBodyTooLarge), true
	}
	ms, err := wire.ParseBatchRequest(req.Body, s.MaxBatch)
	if err != nil {
		if errors.Is(err, wire.ErrBatchTooLarge) {
			return problem(413, wire.ProblemBatchTooLarge), true
		}
		return problem(400, wire.ProblemBatchMalformed), true
	}
	res, tok, refusal, ok := s.fence(req)
	if !ok {
		return refusal, true
	}
	tx := batchTx{keys: map[string]stored{}}
	results := make([]wire.BatchResult, len(ms))
	stopped := map[string]bool{}
	for i, m := range ms {
		n := i + 1
		switch {
		case n == f.CrashAt:
			return outbox.Response{}, false
		case f.TxFailFrom > 0 && n >= f.TxFailFrom:
			results[i] = problemResult(m.Key, wire.BatchRetry, 500, wire.ProblemInternal, 0)
		case m.Entity != "" && stopped[m.Entity] && !s.breakEntityStop:
			results[i] = wire.BatchResult{Key: m.Key, Outcome: wire.BatchNotAttempted}
			continue
		case f.BusyFrom > 0 && n >= f.BusyFrom:
			results[i] = problemResult(m.Key, wire.BatchRetry, 503, wire.ProblemBusy, 0)
		case n == f.InFlightAt:
			results[i] = problemResult(m.Key, wire.BatchRetry, 409, wire.ProblemInFlight, time.Second)
		case failed(f.Fail, n):
			status := 500
			if f.Fail[n] > 0 {
				status = 503
			}
			results[i] = problemResult(m.Key, wire.BatchRetry, status, wire.ProblemInternal, f.Fail[n])
		default:
			results[i] = s.runMutation(&tx, now, user, tok, m)
		}
		if !succeeded(results[i]) {
			stopped[m.Entity] = true
		}
	}
	s.accepted[res] = tok
	for k, st := range tx.keys {
		s.keys[k] = st
	}
	s.Effects = append(s.Effects, tx.effects...)
	return outbox.Response{Status: 200, Header: outbox.Header{"Content-Type": "application/json"},
		Body: wire.AppendBatchResponse(nil, results)}, true
}

// runMutation claims, replays or runs one mutation in tx.
func (s *Server) runMutation(tx *batchTx, now time.Time, user string, tok uint64, m wire.BatchMutation) wire.BatchResult {
	k := user + "\x00" + m.Key
	fp := fingerprint(m.Endpoint, m.Payload)
	s.sent(k, 2)
	st, ok := tx.keys[k]
	if !ok {
		st, ok = s.keys[k]
	}
	if ok && !s.breakIdem {
		if st.fingerprint != fp {
			return problemResult(m.Key, wire.BatchRejected, 422, wire.ProblemKeyReuse, 0)
		}
		return wire.BatchResult{Key: m.Key, Outcome: wire.BatchReplayed, Status: st.status, Body: []byte(st.body)}
	}
	st, effect := business(m.Payload, len(s.Effects)+len(tx.effects)+1)
	st.fingerprint = fp
	if effect {
		tx.effects = append(tx.effects, Effect{Key: m.Key, RecordID: m.OperationID, User: user,
			Hash: queue.HashPayload(m.Payload), Token: tok, At: now, Batch: true})
	}
	tx.keys[k] = st
	outcome := wire.BatchApplied
	if st.status >= 400 {
		outcome = wire.BatchRejected
	}
	return wire.BatchResult{Key: m.Key, Outcome: outcome, Status: st.status, Body: []byte(st.body)}
}

// succeeded reports whether the later mutations of a result's entity may
// run: applied now or before with a 2xx (a replayed 4xx stops them as its
// first answer did).
func succeeded(r wire.BatchResult) bool {
	return (r.Outcome == wire.BatchApplied || r.Outcome == wire.BatchReplayed) && r.Status >= 200 && r.Status < 300
}

func failed(m map[int]time.Duration, k int) bool {
	_, ok := m[k]
	return ok
}

func problemResult(key string, o wire.BatchOutcome, status int, typ string, retryAfter time.Duration) wire.BatchResult {
	return wire.BatchResult{Key: key, Outcome: o, Status: status, Problem: typ,
		Body: []byte(`{"type":"` + typ + `"}`), RetryAfter: retryAfter}
}
