package queue_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tabfence/tabfence/outbox/queue"
)

func rec(id string, seq uint64, entity string, st queue.Status) queue.Record {
	return queue.Record{ID: id, IdempotencyKey: "k" + id, Seq: seq, EntityType: "note", EntityID: entity, UserID: "u", Status: st, NextAttemptAt: t0, MaxAttempts: 5}
}

func claimIDs(p queue.ClaimPlan) []string {
	var ids []string
	for _, r := range p.Claimed {
		ids = append(ids, r.ID)
	}
	return ids
}

func req(limit int) queue.ClaimRequest {
	return queue.ClaimRequest{Lease: la, Now: t0, Limit: limit, LeaseTTL: time.Minute, UserID: "u"}
}

func TestPerEntityOrderAndLanes(t *testing.T) {
	all := []queue.Record{rec("a1", 1, "a", queue.StatusPending), rec("b1", 2, "b", queue.StatusPending), rec("a2", 3, "a", queue.StatusPending), rec("solo", 4, "", queue.StatusPending)}
	p := queue.PlanClaim(all, req(10))
	require.Equal(t, []string{"a1", "a2", "b1", "solo"}, claimIDs(p)) // lanes contiguous, in order
	require.Len(t, queue.Lanes(p.Claimed), 3)
	p = queue.PlanClaim(all, req(2))
	require.Equal(t, []string{"a1", "b1"}, claimIDs(p))
}

func TestEntityBlockedByHeadState(t *testing.T) {
	for _, st := range []queue.Status{queue.StatusSending, queue.StatusLeased, queue.StatusConflict, queue.StatusTerminalFailed, queue.StatusDeadLetter} {
		head := rec("a1", 1, "a", st)
		head.LeaseExpiresAt = t0.Add(time.Minute)
		p := queue.PlanClaim([]queue.Record{head, rec("a2", 2, "a", queue.StatusPending), rec("b1", 3, "b", queue.StatusPending)}, req(10))
		require.Equal(t, []string{"b1"}, claimIDs(p), st)
	}
	// a not-yet-due head blocks its followers too
	head := rec("a1", 1, "a", queue.StatusFailed)
	head.NextAttemptAt = t0.Add(time.Second)
	p := queue.PlanClaim([]queue.Record{head, rec("a2", 2, "a", queue.StatusPending)}, req(10))
	require.Len(t, p.Claimed, 0)
	// acked heads don't block
	p = queue.PlanClaim([]queue.Record{rec("a1", 1, "a", queue.StatusAcked), rec("a2", 2, "a", queue.StatusPending)}, req(10))
	require.Equal(t, []string{"a2"}, claimIDs(p))
}

func TestExpiredLeaseRecoveredByClaim(t *testing.T) {
	head := rec("a1", 1, "a", queue.StatusSending)
	head.Attempts, head.LeaseOwner, head.LeaseToken, head.LeaseExpiresAt = 1, "dead", 3, t0
	p := queue.PlanClaim([]queue.Record{head, rec("a2", 2, "a", queue.StatusPending)}, req(10))
	require.Equal(t, []string{"a1", "a2"}, claimIDs(p))
	require.Len(t, p.Put, 1) // the recovery; the claimed records are only planned
	require.Equal(t, queue.StatusFailed, p.Put[0].Status)
	require.Equal(t, p.Put[0], p.Claimed[0])
	require.Equal(t, 1, p.Claimed[0].Attempts)
	c, err := queue.Charge(p.Claimed[0], req(10).Lease, t0, time.Minute, time.Time{})
	require.NoError(t, err)
	require.Equal(t, "A", c.LeaseOwner)
}

func TestDependencies(t *testing.T) {
	c := rec("c", 3, "c", queue.StatusPending)
	c.DependencyIDs = []string{"a1"}
	// dependency not acked yet (in another entity): wait
	p := queue.PlanClaim([]queue.Record{rec("a1", 1, "a", queue.StatusPending), c}, req(10))
	require.Equal(t, []string{"a1"}, claimIDs(p))
	// acked or absent: go
	p = queue.PlanClaim([]queue.Record{rec("a1", 1, "a", queue.StatusAcked), c}, req(10))
	require.Equal(t, []string{"c"}, claimIDs(p))
	p = queue.PlanClaim([]queue.Record{c}, req(10))
	require.Equal(t, []string{"c"}, claimIDs(p))
	// dependency dead-lettered: stays blocked until the app resolves it
	p = queue.PlanClaim([]queue.Record{rec("a1", 1, "a", queue.StatusDeadLetter), c}, req(10))
	require.Len(t, p.Claimed, 0)
	// dependency earlier in the same lane: allowed, the lane keeps order
	a2 := rec("a2", 2, "a", queue.StatusPending)
	a2.DependencyIDs = []string{"a1"}
	p = queue.PlanClaim([]queue.Record{rec("a1", 1, "a", queue.StatusPending), a2}, req(10))
	require.Equal(t, []string{"a1", "a2"}, claimIDs(p))
}

func TestSessionBoundary(t *testing.T) {
	other := rec("x", 1, "a", queue.StatusPending)
	other.UserID = "mallory"
	mine := rec("m", 2, "a", queue.StatusPending)
	p := queue.PlanClaim([]queue.Record{other, mine}, req(10))
	require.Equal(t, []string{"m"}, claimIDs(p)) // other users' records neither sent nor blocking
	r := req(10)
	r.Paused = []string{"u"}
	require.Len(t, queue.PlanClaim([]queue.Record{mine}, r).Claimed, 0)
	r = req(10)
	r.UserID = ""
	require.Len(t, queue.PlanClaim([]queue.Record{mine}, r).Claimed, 0)
	r = req(10)
	r.TenantID = "t2"
	require.Len(t, queue.PlanClaim([]queue.Record{mine}, r).Claimed, 0)
}

func TestNewerSchemaLeftAlone(t *testing.T) {
	newer := rec("n", 1, "a", queue.StatusPending)
	newer.PayloadSchemaVersion = 3
	a2, b := rec("a2", 2, "a", queue.StatusPending), rec("b", 3, "b", queue.StatusPending)
	a2.PayloadSchemaVersion, b.PayloadSchemaVersion = 2, 2
	r := req(10)
	r.Schema = queue.SchemaGate{Version: 2}
	p := queue.PlanClaim([]queue.Record{newer, a2, b}, r)
	require.Equal(t, []string{"b"}, claimIDs(p))
	require.Len(t, p.Put, 0)
}

func TestNetworkRetryDue(t *testing.T) {
	failed := func(code string, at time.Time) queue.Record {
		r := rec("a1", 1, "a", queue.StatusFailed)
		r.Attempts, r.NextAttemptAt = 1, t0.Add(time.Minute)
		r.LastError = &queue.ErrorInfo{Code: code, At: at}
		return r
	}
	back := t0.Add(-time.Second) // the device reconnected a second ago
	for _, c := range []struct {
		name string
		r    queue.Record
		re   time.Time
		due  bool
	}{
		{"network failure before the reconnect", failed(queue.CodeNetwork, back.Add(-time.Second)), back, true},
		{"offline failure before the reconnect", failed(queue.CodeOffline, back.Add(-time.Second)), back, true},
		{"never reconnected", failed(queue.CodeNetwork, back.Add(-time.Second)), time.Time{}, false},
		{"failed after the reconnect", failed(queue.CodeNetwork, back.Add(time.Millisecond)), back, false},
		{"server asked to wait", failed("http_503", back.Add(-time.Second)), back, false},
		{"rate limited", failed("http_429", back.Add(-time.Second)), back, false},
	} {
		r := c.r
		require.Equal(t, c.due, queue.NetworkRetryDue(&r, c.re, t0), c.name)
		q := req(10)
		q.Reconnected = c.re
		p := queue.PlanClaim([]queue.Record{r, rec("a2", 2, "a", queue.StatusPending)}, q)
		if c.due {
			require.Equal(t, []string{"a1", "a2"}, claimIDs(p), c.name)
			require.Equal(t, 1, p.Claimed[0].Attempts, c.name) // claiming charges nothing
			// The charge makes it due as the plan did, and only with the reconnect.
			_, err := queue.Charge(p.Claimed[0], q.Lease, t0, time.Minute, c.re)
			require.NoError(t, err, c.name)
			_, err = queue.Charge(p.Claimed[0], q.Lease, t0, time.Minute, time.Time{})
			require.ErrorIs(t, err, queue.ErrInvalidTransition, c.name)
		} else {
			require.Len(t, p.Claimed, 0, c.name) // its backoff still blocks the entity
		}
	}
	// Not failed, or not waiting on a backoff: nothing to change.
	r := failed(queue.CodeNetwork, back.Add(-time.Second))
	r.NextAttemptAt = t0
	require.False(t, queue.NetworkRetryDue(&r, back, t0))
	d := failed(queue.CodeNetwork, back.Add(-time.Second))
	d.Status = queue.StatusDeadLetter
	require.False(t, queue.NetworkRetryDue(&d, back, t0))
}

func TestOrphanedRecordsRecoveredByNewerToken(t *testing.T) {
	old := queue.Lease{Name: "q", Owner: "A", Token: 3}
	cur := queue.Lease{Name: "q", Owner: "B", Token: 4}
	r := rec("a1", 1, "a", queue.StatusPending)
	r, err := queue.Claim(r, old, t0, time.Minute)
	require.NoError(t, err)
	r, err = queue.MarkSending(r, old, t0)
	require.NoError(t, err)
	p := queue.PlanClaim([]queue.Record{r, rec("a2", 2, "a", queue.StatusPending)}, queue.ClaimRequest{Lease: cur, Now: t0.Add(time.Second), Limit: 10, LeaseTTL: time.Minute, UserID: "u"})
	require.Equal(t, []string{"a1", "a2"}, claimIDs(p))
	require.Len(t, p.Put, 1) // the recovery is written by the claim
	require.Equal(t, queue.StatusFailed, p.Put[0].Status)
	require.Equal(t, 1, p.Claimed[0].Attempts) // the lost send stays charged
	c, err := queue.Charge(p.Claimed[0], cur, t0.Add(time.Second), time.Minute, time.Time{})
	require.NoError(t, err)
	require.Equal(t, uint64(4), c.LeaseToken)
	require.Equal(t, 2, c.Attempts)
	// the same token is not orphaned: wait for its expiry
	p = queue.PlanClaim([]queue.Record{r}, queue.ClaimRequest{Lease: old, Now: t0.Add(time.Second), Limit: 10, LeaseTTL: time.Minute, UserID: "u"})
	require.Len(t, p.Claimed, 0)
}
