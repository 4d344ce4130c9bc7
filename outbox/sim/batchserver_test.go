package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/wire"
)

// The simulated receiver's batch route must follow the receiver's rules, or
// the simulation proves nothing about the outbox against the real one.

func batchReq(s *Server, tok uint64, ms ...wire.BatchMutation) outbox.Request {
	return outbox.Request{Method: "POST", Endpoint: s.BatchEndpoint, Body: wire.AppendBatchRequest(nil, ms),
		Header: outbox.Header{wire.HeaderResource: resource, wire.HeaderFencingToken: wire.FormatToken(tok)}}
}

func mut(key, entity, payload string) wire.BatchMutation {
	return wire.BatchMutation{Key: key, Endpoint: "/api/commands", OperationID: "id-" + key, Operation: "comment", Entity: entity, Payload: []byte(payload)}
}

func outcomes(t *testing.T, resp outbox.Response, keys ...string) []string {
	t.Helper()
	require.Equal(t, 200, resp.Status, string(resp.Body))
	rs, err := wire.ParseBatchResponse(resp.Body, keys)
	require.NoError(t, err)
	var out []string
	for _, r := range rs {
		out = append(out, string(r.Outcome))
	}
	return out
}

func TestBatchServerReplayNewRejectedAndEntityStop(t *testing.T) {
	s := NewServer()
	tok := s.Issue(resource)
	single := outbox.Request{Method: "POST", Endpoint: "/api/commands", Body: []byte("a:1"), Header: outbox.Header{
		wire.HeaderIdempotencyKey: wire.FormatIdempotencyKey("k1"), wire.HeaderResource: resource, wire.HeaderFencingToken: wire.FormatToken(tok)}}
	require.Equal(t, 201, s.Handle(epoch, "u1", single).Status)
	resp, ok := s.HandleBatch(epoch, "u1", batchReq(s, tok,
		mut("k1", "a", "a:1"),          // sent alone before: replayed
		mut("k2", "b", "b:2:bad"),      // 422, stored
		mut("k3", "b", "b:3"),          // after a failure of b: not attempted
		mut("k4", "c", "c:4"),          // new
		mut("k5", "", ":5:bad"),        // no entity: stops nothing
		mut("k6", "", ":6"),            // new
		mut("k7", "c", "c:7:conflict"), // 409, stored
	), BatchFaults{})
	require.True(t, ok)
	require.Equal(t, []string{"replayed", "rejected", "not-attempted", "applied", "rejected", "applied", "rejected"},
		outcomes(t, resp, "k1", "k2", "k3", "k4", "k5", "k6", "k7"))
	require.Len(t, s.Effects, 3)
	// The whole batch again (a duplicate): every answer replayed or the same.
	resp, _ = s.HandleBatch(epoch, "u1", batchReq(s, tok, mut("k2", "b", "b:2:bad"), mut("k3", "b", "b:3"), mut("k4", "c", "c:4")), BatchFaults{})
	require.Equal(t, []string{"replayed", "not-attempted", "replayed"}, outcomes(t, resp, "k2", "k3", "k4"))
	require.Len(t, s.Effects, 3)
}

func TestBatchServerKeyReuseStaleTooLarge(t *testing.T) {
	s := NewServer()
	s.MaxBatch = 2
	tok := s.Issue(resource)
	resp, _ := s.HandleBatch(epoch, "u1", batchReq(s, tok, mut("k1", "a", "a:1")), BatchFaults{})
	require.Equal(t, []string{"applied"}, outcomes(t, resp, "k1"))
	// Same key, other payload: 422 key reuse for that mutation, not stored,
	// and its entity stops.
	resp, _ = s.HandleBatch(epoch, "u1", batchReq(s, tok, mut("k1", "a", "a:other"), mut("k2", "a", "a:2")), BatchFaults{})
	rs, err := wire.ParseBatchResponse(resp.Body, []string{"k1", "k2"})
	require.NoError(t, err)
	require.Equal(t, wire.BatchRejected, rs[0].Outcome)
	require.Equal(t, 422, rs[0].Status)
	require.Equal(t, wire.ProblemKeyReuse, rs[0].Problem)
	require.Equal(t, wire.BatchNotAttempted, rs[1].Outcome)
	// Another endpoint is another fingerprint.
	m := mut("k1", "a", "a:1")
	m.Endpoint = "/api/other"
	resp, _ = s.HandleBatch(epoch, "u1", batchReq(s, tok, m), BatchFaults{})
	require.Equal(t, []string{"rejected"}, outcomes(t, resp, "k1"))
	// More than MaxBatch: 413, nothing run.
	resp, _ = s.HandleBatch(epoch, "u1", batchReq(s, tok, mut("k3", "a", "a:3"), mut("k4", "b", "b:4"), mut("k5", "c", "c:5")), BatchFaults{})
	require.Equal(t, 413, resp.Status)
	require.Contains(t, string(resp.Body), wire.ProblemBatchTooLarge)
	// A stale token refuses the whole batch, finished keys included.
	tok2 := s.Issue(resource)
	resp, _ = s.HandleBatch(epoch, "u1", batchReq(s, tok2, mut("k6", "d", "d:6")), BatchFaults{})
	require.Equal(t, []string{"applied"}, outcomes(t, resp, "k6"))
	resp, _ = s.HandleBatch(epoch, "u1", batchReq(s, tok, mut("k1", "a", "a:1"), mut("k7", "e", "e:7")), BatchFaults{})
	require.Equal(t, 409, resp.Status)
	require.Equal(t, wire.FormatToken(tok2), resp.Header.Get(wire.HeaderFencingHighest))
	require.Len(t, s.Effects, 2)
	// A malformed document (a key twice) is 400 for the whole batch.
	resp, _ = s.HandleBatch(epoch, "u1", batchReq(s, tok2, mut("k8", "a", "a:8"), mut("k8", "b", "b:8")), BatchFaults{})
	require.Equal(t, 400, resp.Status)
	require.Contains(t, string(resp.Body), wire.ProblemBatchMalformed)
}

func TestBatchServerFaults(t *testing.T) {
	s := NewServer()
	tok := s.Issue(resource)
	ms := []wire.BatchMutation{mut("k1", "a", "a:1"), mut("k2", "b", "b:2"), mut("k3", "a", "a:3"), mut("k4", "c", "c:4")}
	keys := []string{"k1", "k2", "k3", "k4"}
	// A crash mid-batch commits nothing and answers nothing, not even the
	// fence's advance.
	tok2 := s.Issue(resource)
	_, ok := s.HandleBatch(epoch, "u1", batchReq(s, tok2, ms...), BatchFaults{CrashAt: 3})
	require.False(t, ok)
	require.Empty(t, s.Effects)
	resp, _ := s.HandleBatch(epoch, "u1", batchReq(s, tok, ms[:1]...), BatchFaults{})
	require.Equal(t, []string{"applied"}, outcomes(t, resp, "k1"), "the crashed batch's token was not accepted")
	// Out of time from mutation 2: the suffix retries (503 busy), later
	// ones of a stopped entity are not attempted, the prefix commits.
	resp, _ = s.HandleBatch(epoch, "u1", batchReq(s, tok, ms...), BatchFaults{BusyFrom: 2})
	rs, err := wire.ParseBatchResponse(resp.Body, keys)
	require.NoError(t, err)
	require.Equal(t, wire.BatchReplayed, rs[0].Outcome)
	require.Equal(t, wire.BatchRetry, rs[1].Outcome)
	require.Equal(t, 503, rs[1].Status)
	require.Equal(t, wire.BatchRetry, rs[2].Outcome)
	require.Equal(t, wire.BatchRetry, rs[3].Outcome)
	// A handler's 5xx and a key in flight elsewhere: retry, their entity stops.
	resp, _ = s.HandleBatch(epoch, "u1", batchReq(s, tok, ms...), BatchFaults{Fail: map[int]time.Duration{1: 2 * time.Second}, InFlightAt: 2})
	rs, err = wire.ParseBatchResponse(resp.Body, keys)
	require.NoError(t, err)
	require.Equal(t, wire.BatchRetry, rs[0].Outcome)
	require.Equal(t, 2*time.Second, rs[0].RetryAfter)
	require.Equal(t, wire.BatchRetry, rs[1].Outcome)
	require.Equal(t, 409, rs[1].Status)
	require.Equal(t, wire.ProblemInFlight, rs[1].Problem)
	require.Equal(t, wire.BatchNotAttempted, rs[2].Outcome)
	require.Equal(t, wire.BatchApplied, rs[3].Outcome)
	require.Len(t, s.Effects, 2)
	// A later transaction of the batch failed: its mutations retry, even
	// those after a failure of their entity; the earlier ones commit.
	ms = append(ms, mut("k5", "d", "d:5"), mut("k6", "a", "a:6"))
	keys = append(keys, "k5", "k6")
	resp, _ = s.HandleBatch(epoch, "u1", batchReq(s, tok, ms...), BatchFaults{InFlightAt: 1, TxFailFrom: 5})
	rs, err = wire.ParseBatchResponse(resp.Body, keys)
	require.NoError(t, err)
	require.Equal(t, []wire.BatchOutcome{wire.BatchRetry, wire.BatchApplied, wire.BatchNotAttempted, wire.BatchReplayed, wire.BatchRetry, wire.BatchRetry},
		[]wire.BatchOutcome{rs[0].Outcome, rs[1].Outcome, rs[2].Outcome, rs[3].Outcome, rs[4].Outcome, rs[5].Outcome})
	require.Len(t, s.Effects, 3)
	// A server without the batch route.
	s.NoBatch = true
	resp, _ = s.HandleBatch(epoch, "u1", batchReq(s, tok, ms...), BatchFaults{})
	require.Equal(t, 404, resp.Status)
}

// TestCheckBatchCatches: each rule the simulation checks in a client's
// batch reports the batch that breaks it.
func TestCheckBatchCatches(t *testing.T) {
	base := func() (*World, []wire.BatchMutation) {
		w := NewWorld(1, Options{})
		w.failed = nil
		w.enq = map[string]*enqInfo{
			"r1": {user: "u1", entity: "e1", key: "k1", op: "comment", seq: 1},
			"r2": {user: "u1", entity: "e1", key: "k2", op: "comment", seq: 2},
			"r3": {user: "u1", entity: "e2", key: "k3", op: "star", seq: 3},
		}
		return w, []wire.BatchMutation{
			{Key: "k1", Endpoint: "/api/commands", OperationID: "r1", Entity: "note:a", Payload: []byte("a")},
			{Key: "k2", Endpoint: "/api/commands", OperationID: "r2", Entity: "note:a", Payload: []byte("b")},
			{Key: "k3", Endpoint: "/api/stars", OperationID: "r3", Entity: "note:b", Payload: []byte("c")},
		}
	}
	send := func(w *World, ms []wire.BatchMutation, user string) []string {
		w.checkBatch(outbox.Request{Endpoint: w.srv.BatchEndpoint, Body: wire.AppendBatchRequest(nil, ms),
			Header: outbox.Header{wire.HeaderClientUser: wire.FormatClientUser(user)}})
		return w.failed
	}
	w, ms := base()
	require.Empty(t, send(w, ms, "u1"), "a good batch")
	for name, c := range map[string]struct {
		edit func(ms []wire.BatchMutation) []wire.BatchMutation
		user string
		want string
		dep  string // r3 depends on it
	}{
		"entity out of order": {func(ms []wire.BatchMutation) []wire.BatchMutation { return []wire.BatchMutation{ms[1], ms[0], ms[2]} }, "u1", "of entity", ""},
		"dependency after": {func(ms []wire.BatchMutation) []wire.BatchMutation {
			ms[0].Entity = "note:b"
			return []wire.BatchMutation{ms[2], ms[0]}
		}, "u1", "before its dependency", "r1"},
		"dependency of another entity": {func(ms []wire.BatchMutation) []wire.BatchMutation { return ms }, "u1", "of another entity", "r1"},
		"another key":                  {func(ms []wire.BatchMutation) []wire.BatchMutation { ms[0].Key = "k9"; return ms }, "u1", "not its own", ""},
		"another endpoint":             {func(ms []wire.BatchMutation) []wire.BatchMutation { ms[2].Endpoint = "/api/commands"; return ms }, "u1", "alone it goes to", ""},
		"another user":                 {func(ms []wire.BatchMutation) []wire.BatchMutation { return ms }, "u2", "holds r1 of u1", ""},
		"unknown record":               {func(ms []wire.BatchMutation) []wire.BatchMutation { ms[0].OperationID = "r9"; return ms }, "u1", "unknown record", ""},
	} {
		w, ms := base()
		if c.dep != "" {
			w.enq["r3"].deps = []string{c.dep}
		}
		fails := send(w, c.edit(ms), c.user)
		require.NotEmpty(t, fails, name)
		require.Contains(t, fails[0], c.want, name)
	}
}
