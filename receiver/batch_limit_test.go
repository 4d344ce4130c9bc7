package receiver_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/receiver"
	"github.com/tabfence/tabfence/wire"
)

// A batch's answer stays within Options.MaxBatchResponse however large the
// answers it carries (a "big" one is 1,800 bytes escaped, two fit in
// 4,000): past it, a fresh answer is rolled back and answered retry, a
// replay is answered retry, later mutations do not run, and the entity of
// one stopped is not attempted further. Sent again without what was
// answered, the rest goes through.
func TestBatchAnswerBounded(t *testing.T) {
	const limit = 4000
	eachStore(t, receiver.Options{MaxBatchResponse: limit}, func(t *testing.T, e *batchEnv) {
		all := []wire.BatchMutation{mut("b1", "big", "E1"), mut("b2", "big", "E2"), mut("b3", "big", "E3"), mut("b4", "ok", "E3"), mut("n1", "ok", "N")}
		bounded := func(raw []byte) {
			t.Helper()
			require.LessOrEqual(t, len(raw), limit+3*512, "the answer passed its limit by more than three small problems")
		}
		_, rs, raw := e.post(all)
		bounded(raw)
		require.Equal(t, []string{"applied Created", "applied Created", "retry Service Unavailable", "not-attempted ", "retry Service Unavailable"},
			outcomes(rs), "%s", raw)
		require.Equal(t, wire.ProblemBusy, rs[2].Problem)
		require.Equal(t, wire.ProblemBusy, rs[4].Problem)
		require.Equal(t, []int{1, 1, 0, 0, 0}, effectsOf(e, all), "b3's answer did not fit: rolled back")

		_, rs, raw = e.post(all[2:])
		require.Equal(t, []string{"applied Created", "applied Created", "applied Created"}, outcomes(rs), "%s", raw)

		// Replays are bounded the same way: a client cannot make the
		// server answer many copies of large stored answers at once.
		_, rs, raw = e.post(all)
		bounded(raw)
		require.Equal(t, []string{"replayed Created", "replayed Created", "retry Service Unavailable", "not-attempted ", "retry Service Unavailable"},
			outcomes(rs), "%s", raw)
		require.Equal(t, []int{1, 1, 1, 1, 1}, effectsOf(e, all))
	})
}

func effectsOf(e *batchEnv, ms []wire.BatchMutation) []int {
	n := make([]int, len(ms))
	for i, m := range ms {
		n[i] = e.effects(m.Key)
	}
	return n
}

// A batch of new mutations costs, per mutation, its savepoint and its
// handler's statements: the claims and the stored answers are one
// statement each for the whole transaction (claimAll, finishAll), and a
// single request with a batch's key replays the stored headers.
func TestBatchStatementsPerMutation(t *testing.T) {
	eachStoreWith(t, func(st receiver.Store) receiver.Store { return &hookStore{Store: st} }, func(t *testing.T, e *batchEnv) {
		hs := e.store.(*hookStore)
		var mu sync.Mutex
		var execs []string
		hs.before = func(query string) { mu.Lock(); execs = append(execs, query); mu.Unlock() }
		var ms []wire.BatchMutation
		for i := 0; i < 64; i++ {
			ms = append(ms, mut(fmt.Sprintf("s%d", i), "ok", fmt.Sprintf("E%d", i)))
		}
		_, rs, raw := e.post(ms)
		require.Len(t, rs, 64, "%s", raw)
		mu.Lock()
		n := len(execs)
		mu.Unlock()
		require.Equal(t, 2*64, n, "statements besides the transaction's two: %q", execs[:min(n, 6)])
		require.Equal(t, effectsOf(e, ms), slices.Repeat([]int{1}, 64))

		resp, body, err := e.single(ms[3].Key, ms[3].Payload)
		require.NoError(t, err)
		require.Equal(t, 201, resp.StatusCode, "%s", body)
		require.Equal(t, "true", resp.Header.Get(wire.HeaderReplayed))
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "the stored header")
	})
}

// The statement storing a chunk's answers is one text per number of
// answers, whatever their statuses and headers: statement caches (pgx's,
// sqlitestore's) keep one entry for it, not one per mix of answers.
func TestBatchStoreAnswersOneText(t *testing.T) {
	eachStoreWith(t, func(st receiver.Store) receiver.Store { return &hookStore{Store: st} }, func(t *testing.T, e *batchEnv) {
		hs := e.store.(*hookStore)
		var mu sync.Mutex
		texts := map[string]bool{}
		hs.query = func(query string) {
			if strings.Contains(query, "DO UPDATE") {
				mu.Lock()
				texts[query] = true
				mu.Unlock()
			}
		}
		_, rs, raw := e.post([]wire.BatchMutation{mut("m1", "ok", "E1"), mut("m2", "reject", "E2"), mut("m3", "ok", "E3")})
		require.Equal(t, []string{"applied Created", "rejected Unprocessable Entity", "applied Created"}, outcomes(rs), "%s", raw)
		_, rs, raw = e.post([]wire.BatchMutation{mut("n1", "reject", "E1"), mut("n2", "ok", "E2"), mut("n3", "ok", "E3")})
		require.Equal(t, []string{"rejected Unprocessable Entity", "applied Created", "applied Created"}, outcomes(rs), "%s", raw)
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, texts, 1, "texts of the statement storing three answers: %q", texts)
	})
}

// A claim lost in a batch's first transaction (taken over past ClaimTTL)
// leaves nothing stored and answers the batch 500, not the in-flight 409
// of a single request: the batch as a whole is in flight nowhere.
func TestBatchClaimLostWhole(t *testing.T) {
	eachStore(t, receiver.Options{}, func(t *testing.T, e *batchEnv) {
		ms := []wire.BatchMutation{mut("l1", "ok", "E1"), mut("l2", "steal", "E2")}
		resp, _, raw := e.post(ms)
		require.Equal(t, 500, resp.StatusCode, "%s", raw)
		require.Equal(t, wire.ProblemInternal, problemType(t, raw))
		require.Equal(t, []int{0, 0}, effectsOf(e, ms), "nothing of the batch committed")
	})
}
