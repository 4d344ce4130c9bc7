package conformance

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/wire"
)

// raceBatch is the batch the race cases send many copies of: ten mutations
// of three entities, interleaved.
func raceBatch() []wire.BatchMutation {
	ms := make([]wire.BatchMutation, 10)
	for i := range ms {
		ms[i] = mut(fmt.Sprintf("r%d", i), fmt.Sprintf("e%d", i%3), okBody)
	}
	return ms
}

// tally checks what many copies of one batch (and single requests with the
// same keys and payloads, the same mutations) answered: each mutation
// applied exactly once in all, every other answer a replay of that one or
// a retry, never a refusal of the key as reused; and
// within a copy, a mutation after its entity's failure not attempted.
type tally struct {
	t       *testing.T
	muts    []wire.BatchMutation
	applied map[string]int
	bodies  map[string][]string
	counts  map[string]int
}

func newTally(t *testing.T, muts []wire.BatchMutation) *tally {
	return &tally{t: t, muts: muts, applied: map[string]int{}, bodies: map[string][]string{}, counts: map[string]int{}}
}

// copy checks one copy's results and counts them.
func (ty *tally) copy(rs []wire.BatchResult) {
	t := ty.t
	t.Helper()
	require.Len(t, rs, len(ty.muts))
	failed := map[string]bool{}
	for i, r := range rs {
		m := ty.muts[i]
		require.Equal(t, m.Key, r.Key, "result %d", i)
		ty.counts[string(r.Outcome)]++
		switch r.Outcome {
		case wire.BatchApplied:
			require.False(t, failed[m.Entity], "%s applied after its entity failed in the same copy", m.Key)
			ty.applied[m.Key]++
			ty.bodies[m.Key] = append(ty.bodies[m.Key], string(r.Body))
		case wire.BatchReplayed:
			require.False(t, failed[m.Entity], "%s replayed after its entity failed in the same copy", m.Key)
			require.Equal(t, 201, r.Status, "%s replayed: %+v", m.Key, r)
			ty.bodies[m.Key] = append(ty.bodies[m.Key], string(r.Body))
		case wire.BatchRetry:
			failed[m.Entity] = true
		case wire.BatchNotAttempted:
			require.True(t, failed[m.Entity], "%s not attempted though its entity did not fail", m.Key)
		default:
			t.Fatalf("%s: outcome %+v", m.Key, r)
		}
	}
}

// single counts one single request's answer for key.
func (ty *tally) single(key string, r reply) {
	t := ty.t
	t.Helper()
	switch {
	case r.status == 201 && r.replayed():
		ty.bodies[key] = append(ty.bodies[key], string(r.body))
		ty.counts["single replayed"]++
	case r.status == 201:
		ty.applied[key]++
		ty.bodies[key] = append(ty.bodies[key], string(r.body))
		ty.counts["single applied"]++
	case r.status == 409:
		require.Equal(t, wire.ProblemInFlight, r.problem(t).Type, "single %s: 409 of type", key)
		ty.counts["single in flight"]++
	default:
		t.Fatalf("single %s: status %d body %s", key, r.status, r.body)
	}
}

// check requires each mutation applied exactly once, by whichever request,
// every answer that carries a body carrying the same one, and one effect
// per key in the database.
func (ty *tally) check(e *env) {
	t := ty.t
	t.Helper()
	t.Logf("outcomes %v", ty.counts)
	for _, m := range ty.muts {
		require.Equal(t, 1, ty.applied[m.Key], "%s applied %d times", m.Key, ty.applied[m.Key])
		for _, b := range ty.bodies[m.Key] {
			require.JSONEq(t, ty.bodies[m.Key][0], b, "%s: answers differ", m.Key)
		}
		require.Equal(t, 1, e.effectsOf(m.Key), "%s: effects", m.Key)
	}
	wantEffects(t, e, len(ty.muts))
}

// sendCopies sends n copies of muts at once, spread over the servers at
// bases, and returns each copy's results.
func (e *env) sendCopies(n int, bases []string, muts []wire.BatchMutation, start <-chan struct{}) func() [][]wire.BatchResult {
	out := make([][]wire.BatchResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			r, rs, err := e.tryBatch(bases[i%len(bases)], breq{user: "alice", muts: muts})
			if err == nil && r.status != 200 {
				err = fmt.Errorf("status %d body %s", r.status, r.body)
			}
			out[i], errs[i] = rs, err
		}(i)
	}
	return func() [][]wire.BatchResult {
		wg.Wait()
		for i, err := range errs {
			require.NoError(e.t, err, "copy %d", i)
		}
		return out
	}
}

// sendSingles sends n single requests at once carrying the keys and
// payloads of muts, from the last mutation backwards (to meet the batches
// halfway), spread over the servers at bases; its func tallies them.
func (e *env) sendSingles(n int, bases []string, muts []wire.BatchMutation, start <-chan struct{}) func(*tally) {
	key := func(i int) wire.BatchMutation { return muts[len(muts)-1-i%len(muts)] }
	out := make([]reply, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			m := key(i)
			out[i], errs[i] = e.tryAt(bases[i%len(bases)], req{user: "alice", key: m.Key, body: string(m.Payload)})
		}(i)
	}
	return func(ty *tally) {
		wg.Wait()
		for i, r := range out {
			require.NoError(e.t, errs[i], "single %d", i)
			ty.single(key(i).Key, r)
		}
	}
}

// testBatchConcurrent: 100 copies of one batch at once (a client resending
// after lost responses, several tabs): each mutation takes effect once.
func testBatchConcurrent(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	e.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 100
	muts := raceBatch()
	start := make(chan struct{})
	wait := e.sendCopies(100, []string{e.srv.URL}, muts, start)
	close(start)
	ty := newTally(t, muts)
	for _, rs := range wait() {
		ty.copy(rs)
	}
	ty.check(e)
}

// testBatchVsSingle: copies of a batch race single requests carrying the
// same keys: whichever runs a key first runs it alone.
func testBatchVsSingle(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	e.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 100
	muts := raceBatch()
	start, startBatches := make(chan struct{}), make(chan struct{})
	wait := e.sendCopies(20, []string{e.srv.URL}, muts, startBatches)
	waitSingles := e.sendSingles(3*len(muts), []string{e.srv.URL}, muts, start)
	close(start) // the singles a head start, so that some of them win a key
	runtime.Gosched()
	close(startBatches)
	ty := newTally(t, muts)
	for _, rs := range wait() {
		ty.copy(rs)
	}
	waitSingles(ty)
	ty.check(e)
}

// testBatchTwoInstances: two server instances (a receiver and a store each)
// on one database get copies of the same batch, and single requests with
// its keys, at once.
func testBatchTwoInstances(t *testing.T, newDB NewDB) {
	e := newEnv(t, newDB, nil)
	e.client.Transport.(*http.Transport).MaxIdleConnsPerHost = 100
	st2, err := e.open(context.Background())
	require.NoError(t, err, "open the second instance's store")
	t.Cleanup(func() { _ = st2.Close() })
	srv2 := httptest.NewServer(e.routes(receiver.New(st2, e.opts)))
	t.Cleanup(srv2.Close)
	muts := raceBatch()
	start := make(chan struct{})
	bases := []string{e.srv.URL, srv2.URL}
	wait := e.sendCopies(100, bases, muts, start)
	waitSingles := e.sendSingles(2*len(muts), []string{srv2.URL, e.srv.URL}, muts, start)
	close(start)
	ty := newTally(t, muts)
	for _, rs := range wait() {
		ty.copy(rs)
	}
	waitSingles(ty)
	ty.check(e)
	// Afterwards, each instance answers from what either stored: nothing
	// runs again (a key a single request won is replayed to the batch).
	for _, base := range bases {
		r, rs, err := e.tryBatch(base, breq{user: "alice", muts: muts})
		require.NoError(t, err)
		want(t, r, 200)
		after := newTally(t, muts)
		after.copy(rs)
		require.Empty(t, after.applied, "a mutation ran again afterwards")
	}
	wantEffects(t, e, len(muts))
}
