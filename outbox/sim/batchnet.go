package sim

import (
	"strconv"
	"strings"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/wire"
)

// batchKnobs are a world's batch settings and fault rates, all from its seed.
type batchKnobs struct {
	// tags is the endpoint of "tags" records: the default, an absolute
	// URL of the batch endpoint's origin, or of another origin (never in
	// a batch).
	tags      string
	mode      int // 0: every tab sends one by one; 1: every tab batches; 2: each (re)opened tab picks
	max       int // Config.BatchMax of the batching tabs
	pCrash    float64
	pBusy     float64
	pFail     float64
	pInFlight float64
	pGarble   float64 // a 200 answer whose body is cut (a broken proxy)
	// pUsurp: just before a batch arrives, a leader the world does not
	// run (a window of another browser profile sharing the resource) is
	// issued a token and the server accepts it, so the batch is stale: a
	// frozen-and-stolen leader does this too, but rarely.
	pUsurp  float64
	pTxFail float64
}

func (w *World) drawBatchKnobs() {
	k := &w.batch
	k.mode = w.rng.IntN(3)
	if w.rng.IntN(2) == 0 {
		w.srv.BatchEndpoint = appOrigin + w.srv.BatchEndpoint
	}
	switch w.rng.IntN(3) {
	case 1:
		k.tags = appOrigin + "/api/tags?v=1"
	case 2:
		k.tags = "https://other.example/api/tags"
	}
	if k.mode == 0 {
		return
	}
	k.max = 1 + w.rng.IntN(12)
	w.srv.MaxBatch = 2 + w.rng.IntN(12) // below max: 413, then halved pages
	w.srv.NoBatch = w.rng.IntN(12) == 0 // an old server: 404, then one by one
	if w.rng.IntN(4) == 0 {
		w.srv.MaxBody = 300 + w.rng.IntN(1000) // a few mutations' worth
	}
	k.pCrash = w.rng.Float64() * 0.1
	k.pBusy = w.rng.Float64() * 0.2
	k.pFail = w.rng.Float64() * 0.2 // per mutation
	k.pInFlight = w.rng.Float64() * 0.05
	k.pGarble = w.rng.Float64() * 0.03
	k.pUsurp = w.rng.Float64() * 0.03
	k.pTxFail = w.rng.Float64() * 0.05
}

// batching reports whether a (re)opened tab sends batches.
func (w *World) batching() bool {
	switch w.batch.mode {
	case 1:
		return true
	case 2:
		return w.rng.IntN(2) == 0
	}
	return false
}

// deliver hands req to the server; a batch gets the server-side faults the
// world picks for it and is checked first. answered is false when the
// server crashed mid-batch.
func (w *World) deliver(user string, req outbox.Request) (resp outbox.Response, answered bool) {
	if req.Endpoint != w.srv.BatchEndpoint {
		return w.srv.Handle(w.now, user, req), true
	}
	n := w.checkBatch(req)
	if res := req.Header.Get(wire.HeaderResource); res != "" && w.chance(w.batch.pUsurp) {
		w.srv.accepted[res] = w.srv.Issue(res)
		w.tracef("a leader elsewhere takes the fence: token %d accepted", w.srv.accepted[res])
	}
	var f BatchFaults
	pick := func(p float64) int {
		if n > 0 && w.chance(p) {
			return 1 + w.rng.IntN(n)
		}
		return 0
	}
	f.CrashAt, f.BusyFrom, f.InFlightAt = pick(w.batch.pCrash), pick(w.batch.pBusy), pick(w.batch.pInFlight)
	if n > 1 {
		if f.TxFailFrom = pick(w.batch.pTxFail); f.TxFailFrom == 1 {
			f.TxFailFrom = 0 // the first transaction's failure is a 500 for the whole batch
		}
	}
	for i := 1; i <= n; i++ {
		if w.chance(w.batch.pFail) {
			if f.Fail == nil {
				f.Fail = map[int]time.Duration{}
			}
			f.Fail[i] = time.Duration(w.rng.IntN(3)) * time.Second
		}
	}
	resp, answered = w.srv.HandleBatch(w.now, user, req, f)
	switch {
	case !answered:
		w.stats.ServerCrashes++
		w.tracef("server crashed at mutation %d of %s: nothing committed", f.CrashAt, describe(req))
	case f.CrashAt+f.BusyFrom+f.InFlightAt+f.TxFailFrom+len(f.Fail) > 0:
		w.tracef("batch faults %+v", f)
	}
	switch {
	case !answered:
	case resp.Status == 200 && w.chance(w.batch.pGarble):
		resp.Body = resp.Body[:len(resp.Body)/2]
		w.stats.BatchGarbled++
		w.tracef("the answer to %s is cut short", describe(req))
	case resp.Status == 200:
		w.stats.BatchesAnswered++
		if f.BusyFrom+f.TxFailFrom > 0 {
			w.stats.BatchPartial++
		}
		w.stats.BatchFailed += len(f.Fail)
	case resp.Status == 409:
		w.stats.BatchStale++
	case resp.Status == 413:
		w.stats.BatchTooLarge++
	case resp.Status == 404:
		w.stats.BatchNoRoute++
	}
	return resp, answered
}

// checkBatch checks what the client put in a batch: a valid document of
// known records, each under its own key and its single endpoint, all of
// the user the request names, an entity's records in order, and a
// dependency only of the same entity and before its dependents. It returns
// the mutation count.
func (w *World) checkBatch(req outbox.Request) int {
	w.stats.Batches++
	ms, err := wire.ParseBatchRequest(req.Body, 1<<20)
	if err != nil {
		w.violation("client sent a malformed batch: %v", err)
		return 0
	}
	if len(ms) == 0 {
		w.violation("client sent an empty batch")
	}
	w.stats.BatchedMutations += len(ms)
	last := map[string]uint64{}
	at := map[string]int{}
	for i, m := range ms {
		in := w.enq[m.OperationID]
		if in == nil {
			w.violation("batch names unknown record %q", m.OperationID)
			continue
		}
		at[m.OperationID] = i
		if m.Key != in.key {
			w.violation("batch sends %s under key %s, not its own", m.OperationID, m.Key)
		}
		ep := w.endpointOf(in.op)
		if origin, _ := splitOrigin(ep); origin != "" && origin != appOrigin {
			w.violation("batch holds %s, whose endpoint %q is of another origin", m.OperationID, ep)
		}
		if m.Endpoint != pathOf(ep) {
			w.violation("batch sends %s to endpoint %q, alone it goes to %q", m.OperationID, m.Endpoint, ep)
		}
		if cu, ok := req.Header[wire.HeaderClientUser]; !ok || cu != wire.FormatClientUser(in.user) {
			w.violation("batch for user %q holds %s of %s", cu, m.OperationID, in.user)
		}
		if s, ok := last[in.entity]; ok {
			if in.seq <= s {
				w.violation("batch holds %s (seq %d) of entity %q after seq %d", m.OperationID, in.seq, in.entity, s)
			}
			w.stats.SameEntity++
		}
		last[in.entity] = in.seq
	}
	for i, m := range ms { // a dependency placed after its dependent
		if in := w.enq[m.OperationID]; in != nil {
			for _, d := range in.deps {
				if j, ok := at[d]; ok && j > i {
					w.violation("batch holds %s before its dependency %s", m.OperationID, d)
				} else if ok && (ms[j].Entity != m.Entity || m.Entity == "") {
					// The receiver stops only an entity's later mutations:
					// a failed dependency would not stop this one.
					w.violation("batch holds %s with its dependency %s of another entity", m.OperationID, d)
				}
			}
		}
	}
	return len(ms)
}

// appOrigin is the app's origin, the one of absolute endpoints that may
// go in a batch.
const appOrigin = "https://app.example"

// splitOrigin splits an absolute URL into origin and path ("" and ep for a
// path).
func splitOrigin(ep string) (origin, path string) {
	for _, scheme := range []string{"https://", "http://"} {
		if rest, ok := strings.CutPrefix(ep, scheme); ok {
			if i := strings.IndexAny(rest, "/?"); i >= 0 {
				return scheme + rest[:i], rest[i:]
			}
			return ep, "/"
		}
	}
	return "", ep
}

// pathOf is the path and query a request to ep names, as the receiver
// sees it.
func pathOf(ep string) string {
	_, p := splitOrigin(ep)
	return p
}

// batchLen is the mutation count of a batch request (0 if malformed).
func batchLen(req outbox.Request) int {
	ms, _ := wire.ParseBatchRequest(req.Body, 1<<20)
	return len(ms)
}

// resultsValid reports whether resp is a results document for req.
func resultsValid(req outbox.Request, resp outbox.Response) bool {
	ms, err := wire.ParseBatchRequest(req.Body, 1<<20)
	if err != nil {
		return false
	}
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.Key
	}
	_, err = wire.ParseBatchResponse(resp.Body, keys)
	return err == nil
}

// outcomesOf lists a batch answer's outcomes for the trace ("" for
// anything else).
func outcomesOf(req outbox.Request, resp outbox.Response) string {
	ms, err := wire.ParseBatchRequest(req.Body, 1<<20)
	if err != nil || resp.Status != 200 || req.Endpoint == "" {
		return ""
	}
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.Key
	}
	rs, err := wire.ParseBatchResponse(resp.Body, keys)
	if err != nil {
		return " (results malformed)"
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Outcome)
		if r.Status != 0 {
			out[i] += " " + strconv.Itoa(r.Status)
		}
	}
	return " [" + strings.Join(out, ", ") + "]"
}

// describe names a request in the trace: its record, or a batch's records.
func describe(req outbox.Request) string {
	if req.RecordID != "" {
		return req.RecordID
	}
	ms, err := wire.ParseBatchRequest(req.Body, 1<<20)
	if err != nil {
		return "batch(malformed)"
	}
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.OperationID
	}
	return "batch[" + strings.Join(ids, " ") + "]"
}
