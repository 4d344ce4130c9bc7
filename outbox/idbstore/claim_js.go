//go:build js && wasm

package idbstore

import (
	"context"
	"syscall/js"

	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/outbox/queue"
)

// getByID issues a lookup of record id through the unique id index.
func getByID(t *txn, recs js.Value, id string) (js.Value, error) {
	ix, err := idIndex(t, recs)
	if err != nil {
		return js.Undefined(), err
	}
	return t.call(ix, "get", id)
}

// idIndex is the unique id index of recs, resolved once for a
// transaction's lookups of many records (getIn): each resolution is a
// call into JavaScript and a js.Value the runtime tracks.
func idIndex(t *txn, recs js.Value) (js.Value, error) {
	return t.call(recs, "index", jsName(indexID))
}

// getIn issues a lookup of record id in ix (idIndex).
func getIn(t *txn, ix js.Value, id string) (js.Value, error) {
	return t.call(ix, "get", id)
}

// readLease issues a get of lease row name (found=false when absent).
func readLease(t *txn, name string) (js.Value, error) {
	leases, err := t.store(storeLeases)
	if err != nil {
		return js.Undefined(), err
	}
	return t.call(leases, "get", name)
}

func leaseResult(r js.Value) (queue.Lease, bool, error) {
	v := r.Get("result")
	if v.IsUndefined() {
		return queue.Lease{}, false, nil
	}
	l, err := decodeLease(v)
	return l, err == nil, err
}

// Claim implements outbox.Store: the lease check, the non-acked records in seq
// order and the claim writes, in one transaction.
//
// The records are read a page at a time, only until the plan holds a full
// batch or the queue ends: the first page from the live index, the next ones
// from the store by seq (acked records skipped). A claim's cost so follows
// the batch and the blocked records ahead of it, not the queue's length —
// reading the whole queue for every batch made draining a long offline
// backlog quadratic. The plan is the one PlanClaim makes over the whole
// queue: the pages are a seq-ordered prefix of it, so every entity's earlier
// records are in them, and the status of a dependency beyond them is looked
// up by id (ClaimRequest.Beyond).
func (s *Store) Claim(ctx context.Context, req queue.ClaimRequest) ([]queue.Record, error) {
	const op = "claim"
	t, err := s.beginCtx(ctx, op, raw.ReadWrite, storeRecords, storeLeases)
	if err != nil {
		return nil, err
	}
	lr, err := readLease(t, req.Lease.Name)
	if err != nil {
		return nil, t.fail(op, err)
	}
	recs, err := t.store(storeRecords)
	if err != nil {
		return nil, t.fail(op, err)
	}
	limit := max(req.Limit, 1)
	page := s.claimPage
	if page <= 0 {
		page = max(2*limit, 32)
	}
	ix, err := t.call(recs, "index", indexLive)
	var first js.Value
	if err == nil {
		first, err = t.call(ix, "getAll", keyRange().Call("only", 1), page)
	}
	if err != nil {
		return nil, t.fail(op, err)
	}
	if err := t.wait(first); err != nil {
		return nil, t.fail(op, err)
	}
	cur, found, err := leaseResult(lr)
	if err != nil {
		s.sawCorrupt(err)
		return nil, t.abort(err)
	}
	if !queue.CurrentLease(cur, found, req.Lease) {
		return nil, t.abort(queue.ErrStaleOwner)
	}
	c := &claimRead{s: s, t: t, recs: recs, page: page, raw: map[string]js.Value{}}
	c.add(first.Get("result"), false)
	plan, err := c.plan(req, limit)
	if err != nil {
		return nil, t.fail(op, err)
	}
	if len(plan.Put) == 0 {
		t.release()
		return plan.Claimed, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, t.abort(err)
	}
	for i := range plan.Put {
		if _, err := t.call(recs, "put", encodeRecord(&plan.Put[i], c.raw[plan.Put[i].ID])); err != nil {
			return nil, t.fail(op, err)
		}
	}
	if err := t.end(op); err != nil {
		return nil, err
	}
	return plan.Claimed, nil
}

// claimRead is what a claim has read of the queue so far, a page at a
// time in seq order: the live records (raw: their stored objects by id),
// whether more may follow, and the last seq read.
type claimRead struct {
	s    *Store
	t    *txn
	recs js.Value
	page int
	raw  map[string]js.Value
	live []queue.Record
	more bool
	last js.Value
}

// add takes a page of stored records; onlyLive skips acked ones (a page of
// the store, not of the live index).
func (c *claimRead) add(arr js.Value, onlyLive bool) {
	n := arr.Length()
	for i := 0; i < n; i++ {
		v := arr.Index(i)
		if onlyLive && !v.Get(fieldLive).Equal(js.ValueOf(1)) {
			continue // acked (or not ours)
		}
		r, err := decodeRecord(v)
		if err != nil {
			c.s.sawCorrupt(err)
			continue
		}
		c.raw[r.ID] = v
		c.live = append(c.live, r)
	}
	c.more, c.last = n == c.page, js.Undefined()
	if n > 0 {
		c.last = arr.Index(n - 1).Get("seq")
	}
}

// plan plans the claim over the pages read, reading more until the plan
// holds limit records or the queue ends.
func (c *claimRead) plan(req queue.ClaimRequest, limit int) (queue.ClaimPlan, error) {
	var beyond map[string]queue.Status
	for {
		if c.more {
			var err error
			if beyond, err = c.s.beyondDeps(c.t, c.recs, c.live, beyond); err != nil {
				return queue.ClaimPlan{}, err
			}
			req.Beyond = beyond
		} else {
			req.Beyond = nil // the whole queue was read: absent means not live
		}
		plan := queue.PlanClaim(c.live, req)
		if !c.more || len(plan.Claimed) >= limit {
			return plan, nil
		}
		next, err := c.t.call(c.recs, "getAll", keyRange().Call("lowerBound", c.last, true), c.page)
		if err == nil {
			err = c.t.wait(next)
		}
		if err != nil {
			return queue.ClaimPlan{}, err
		}
		c.add(next.Get("result"), true)
	}
}

// beyondDeps adds to known (returned, allocated when nil) the status of
// every live record that a record of read depends on and that read does not
// hold: it lies beyond the pages read. Each id is looked up once, by the id
// index; an id not found or not live is left out (absent counts as acked).
func (s *Store) beyondDeps(t *txn, recs js.Value, read []queue.Record, known map[string]queue.Status) (map[string]queue.Status, error) {
	var ids []string
	var in map[string]bool
	for i := range read {
		for _, d := range read[i].DependencyIDs {
			if in == nil {
				in = make(map[string]bool, len(read))
				for j := range read {
					in[read[j].ID] = true
				}
			}
			if _, done := known[d]; !done && !in[d] {
				ids = append(ids, d)
			}
		}
	}
	if len(ids) == 0 {
		return known, nil
	}
	if known == nil {
		known = map[string]queue.Status{}
	}
	ix, err := t.call(recs, "index", indexID)
	if err != nil {
		return known, err
	}
	gets := make([]js.Value, len(ids))
	for i, id := range ids {
		if gets[i], err = t.call(ix, "get", id); err != nil {
			return known, err
		}
	}
	if err := t.wait(gets[len(gets)-1]); err != nil {
		return known, err
	}
	for i, id := range ids {
		v := gets[i].Get("result")
		if v.Type() != js.TypeObject || !v.Get(fieldLive).Equal(js.ValueOf(1)) {
			known[id] = queue.StatusAcked // absent or acked: done
			continue
		}
		if st := v.Get("status"); st.Type() == js.TypeString {
			known[id] = queue.Status(st.String())
		} else {
			known[id] = queue.StatusPending // unreadable: not done
		}
	}
	return known, nil
}
