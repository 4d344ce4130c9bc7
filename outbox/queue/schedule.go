package queue

import (
	"time"
)

// ClaimRequest asks a Store for the next batch. The Store verifies, in the
// same transaction, that Lease is still the current lease (owner and token),
// then applies PlanClaim.
type ClaimRequest struct {
	Lease    Lease
	Now      time.Time
	Limit    int           // records per batch
	LeaseTTL time.Duration // how long claimed records stay leased
	UserID   string        // session boundary: only this user's records
	TenantID string
	Schema   SchemaGate // records it leaves alone (SchemaUnsupported) are not claimed
	Paused   []string   // users whose queue is paused (auth)
	// Beyond: statuses of records the ones passed to PlanClaim depend on,
	// when the Store passed only a seq-ordered prefix of the queue and those
	// records lie beyond it (a Store that passes every record leaves it nil).
	Beyond map[string]Status
	// Reconnected: when the device last regained network (zero: never).
	// A failed record whose last error was the network's, before that
	// moment, is due now (see outbox.Outbox.Reconnected).
	Reconnected time.Time
}

// ClaimPlan is what a Store writes for a claim: Put (the in-flight records
// recovered from a dead or superseded owner), and what it returns: Claimed,
// in send order, as they are stored (waiting; a Put one as recovered). The
// claimed records are not written: the flush takes each with Charge.
type ClaimPlan struct {
	Put     []Record
	Claimed []Record
}

// PlanClaim picks a bounded batch of due records. It is pure; a Store passes
// every record that is not acked (acked ones may be omitted: an absent
// dependency counts as done), or a prefix of them in seq order together
// with req.Beyond, the statuses of the dependencies outside that prefix.
//
// Rules, in order:
//   - In-flight records whose lease expired are recovered first (RecoverExpired),
//     so no state can only be left by its dead owner.
//   - Session boundary: only records of req.UserID/TenantID are considered;
//     a paused user's records are skipped.
//   - Per-entity order: within an entity (EntityKey), records go by Seq. Only
//     the oldest unsettled record may head a lane; the lane continues with the
//     following records of the entity while they are due too. A record that is
//     in flight, not due, blocked (conflict, terminal, dead letter: they stop
//     the entity until the app retries or discards them), of a schema the
//     runtime leaves alone (req.Schema), or waiting on a dependency stops its
//     entity there.
//   - Dependencies: every DependencyID must be acked (absent counts as acked)
//     or precede the record in the same lane.
//   - Lanes are ordered by their head's Seq; at most Limit records in all.
//   - A record that failed for want of network before req.Reconnected is
//     due now, whatever its backoff said (networkRetryDue).
func PlanClaim(all []Record, req ClaimRequest) ClaimPlan {
	var plan ClaimPlan
	recs := recoverExpired(all, req, &plan)
	paused := false
	for _, u := range req.Paused {
		if u == req.UserID {
			paused = true
		}
	}
	if req.UserID == "" || paused {
		return plan
	}
	for _, l := range claimLanes(recs, req) {
		plan.Claimed = append(plan.Claimed, l...)
	}
	return plan
}

// Lanes splits a claimed batch into its per-entity lanes: PlanClaim puts
// each lane's records together, in send order.
func Lanes(recs []Record) [][]Record {
	var lanes [][]Record
	for i := range recs {
		if i == 0 || recs[i].EntityKey() != recs[i-1].EntityKey() {
			lanes = append(lanes, nil)
		}
		lanes[len(lanes)-1] = append(lanes[len(lanes)-1], recs[i])
	}
	return lanes
}

// recoverExpired returns a copy of all in seq order with every in-flight
// record whose lease expired (or was orphaned by a newer token) recovered,
// and puts each recovered record in plan.
func recoverExpired(all []Record, req ClaimRequest, plan *ClaimPlan) []Record {
	putAt := map[string]int{} // id -> index in plan.Put: each record is put once
	recs := make([]Record, len(all))
	copy(recs, all)
	for i := range recs {
		if orphaned(&recs[i], req.Lease) {
			// Leased under an older token of this queue's lease: that owner
			// was superseded (a frozen owner whose lock was stolen) and can
			// change nothing any more, so its lease is over now.
			recs[i].LeaseExpiresAt = req.Now
		}
		if LeaseExpired(&recs[i], req.Now) {
			if r, err := RecoverExpired(recs[i], req.Now); err == nil {
				recs[i] = r
				if j, ok := putAt[r.ID]; ok {
					plan.Put[j] = r
				} else {
					putAt[r.ID] = len(plan.Put)
					plan.Put = append(plan.Put, r)
				}
			}
		}
	}
	SortBySeq(recs)
	return recs
}

// claimLanes picks the claimable records of recs (in seq order), at most
// req.Limit, as per-entity lanes in the order their entities first appear:
// an entity's lane stops at its first record that is not due, not
// supported here, not chargeable, or waits on a dependency outside the lane.
func claimLanes(recs []Record, req ClaimRequest) [][]Record {
	status := make(map[string]Status, len(recs))
	for i := range recs {
		status[recs[i].ID] = recs[i].Status
	}
	limit := max(req.Limit, 1)
	stopped := map[string]bool{} // entity keys that cannot advance further
	laneOf := map[string]int{}   // entity key -> lane index
	inLane := map[string]int{}   // record id -> lane index
	var lanes [][]Record
	total := 0
	for i := range recs {
		r := &recs[i]
		if r.UserID != req.UserID || r.TenantID != req.TenantID || r.Status == StatusAcked {
			continue
		}
		key := r.EntityKey()
		if stopped[key] {
			continue
		}
		lane, hasLane := laneOf[key]
		due := Due(r, req.Now) || networkRetryDue(r, req.Reconnected, req.Now) // Charge makes the latter due
		ok := total < limit && due && req.Schema.Action(r) != SchemaUnsupported &&
			depsDone(r, status, req.Beyond, inLane, lane, hasLane)
		if !ok {
			stopped[key] = true
			continue
		}
		if _, err := Charge(*r, req.Lease, req.Now, req.LeaseTTL, req.Reconnected); err != nil {
			stopped[key] = true
			continue
		}
		if !hasLane {
			lane = len(lanes)
			laneOf[key] = lane
			lanes = append(lanes, nil)
		}
		lanes[lane] = append(lanes[lane], *r)
		inLane[r.ID] = lane
		total++
	}
	return lanes
}

// depsDone reports whether every dependency of r is acked (or absent: done)
// or claimed earlier in r's own lane.
func depsDone(r *Record, status, beyond map[string]Status, inLane map[string]int, lane int, hasLane bool) bool {
	for _, d := range r.DependencyIDs {
		st, present := status[d]
		if !present {
			st, present = beyond[d]
		}
		if !present || st == StatusAcked {
			continue
		}
		if l, same := inLane[d]; same && hasLane && l == lane {
			continue
		}
		return false
	}
	return true
}

// orphaned reports whether an in-flight record is leased under a token older
// than the claimer's current lease: its owner was superseded and every change
// it tries is refused (ErrStaleOwner), so the record need not wait for its
// lease expiry.
func orphaned(r *Record, l Lease) bool {
	return r.Status.InFlight() && r.LeaseToken != 0 && r.LeaseToken < l.Token
}

// Error codes of failures that say nothing about the receiver: the request
// could not leave the device, or its answer was lost on the way back.
const (
	CodeNetwork = "network"
	CodeOffline = "offline"
)

// networkRetryDue reports whether r is a failed record waiting out a
// backoff that a network failure before reconnected earned: once the
// network is back that backoff protects no one, so the record is due at
// now. A zero reconnected never makes anything due.
func networkRetryDue(r *Record, reconnected, now time.Time) bool {
	if reconnected.IsZero() || r.Status != StatusFailed || r.LastError == nil || !r.NextAttemptAt.After(now) {
		return false
	}
	c := r.LastError.Code
	return (c == CodeNetwork || c == CodeOffline) && r.LastError.At.Before(reconnected)
}
