// Package memstore is a thread-safe in-memory outbox.Store, for tests and the
// simulation (outbox/sim). It follows the Store contract exactly (one lock =
// one transaction), so it is also the executable specification of an
// IndexedDB store (outbox/idbstore); outbox/storetest runs both.
package memstore

import (
	"context"
	"sync"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// Store is a thread-safe in-memory outbox.Store for tests and the simulation. It
// follows the Store contract exactly (one lock = one transaction), so it is
// also the executable specification of an IndexedDB store.
type Store struct {
	mu     sync.Mutex
	recs   map[string]queue.Record
	blobs  map[string][]byte
	leases map[string]queue.Lease
	meta   outbox.Meta
	seq    uint64

	// OnWrite, when set, observes every record write made under a lease
	// (Claim, Update) while the store's lock is held: the simulation checks
	// that no stale owner ever wrote. Set it before use.
	OnWrite func(w Write)
}

// Write describes one record write made under a lease.
type Write struct {
	Op        string // "claim" or "update"
	RecordID  string
	Owner     string
	Token     uint64 // the writer's lease token
	Current   uint64 // the lease row's token at the time of the write
	NewStatus queue.Status
}

// New returns an empty store.
func New() *Store {
	return &Store{recs: map[string]queue.Record{}, blobs: map[string][]byte{}, leases: map[string]queue.Lease{}}
}

// Seed puts records as they are, in order, each with the next seq: a test
// plants statuses (acked, dead-lettered) that no Enqueue writes.
func (s *Store) Seed(recs ...queue.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		s.seq++
		r.Seq = s.seq
		s.recs[r.ID] = r.Clone()
	}
}

func (s *Store) ctxErr(ctx context.Context) error { return ctx.Err() }

// Enqueue implements outbox.Store.
func (s *Store) Enqueue(ctx context.Context, req queue.EnqueueRequest) (queue.EnqueueResult, error) {
	if err := s.ctxErr(ctx); err != nil {
		return queue.EnqueueResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in := &req.Record
	key := in.EntityKey()
	var related []queue.Record
	for _, r := range s.recs {
		if r.UserID != in.UserID || r.Status.Settled() {
			continue
		}
		if (in.OperationKey != "" && r.OperationKey == in.OperationKey) || r.EntityKey() == key {
			c := r.Clone()
			if c.PayloadRef != "" {
				c.Payload = append([]byte(nil), s.blobs[c.PayloadRef]...)
			}
			related = append(related, c)
		}
	}
	now := in.CreatedAt
	plan, err := queue.PlanEnqueue(related, req, now)
	if err != nil {
		return queue.EnqueueResult{}, err
	}
	if !plan.Write {
		return plan.Result, nil
	}
	if plan.Result.Action == queue.ActionAppended {
		s.seq++
		plan.Put.Seq = s.seq
		plan.Result.Record.Seq = s.seq
	}
	if plan.DeleteBlob != "" {
		delete(s.blobs, plan.DeleteBlob)
	}
	if plan.Put.PayloadRef != "" {
		s.blobs[plan.Put.PayloadRef] = plan.Blob
	}
	s.recs[plan.Put.ID] = plan.Put.Clone()
	plan.Result.Record = plan.Result.Record.Clone()
	return plan.Result, nil
}

func (s *Store) current(l queue.Lease) (uint64, bool) {
	cur, found := s.leases[l.Name]
	return cur.Token, queue.CurrentLease(cur, found, l)
}

// Claim implements outbox.Store.
func (s *Store) Claim(ctx context.Context, req queue.ClaimRequest) ([]queue.Record, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	curTok, ok := s.current(req.Lease)
	if !ok {
		return nil, queue.ErrStaleOwner
	}
	all := make([]queue.Record, 0, len(s.recs))
	for _, r := range s.recs {
		if r.Status != queue.StatusAcked {
			all = append(all, r)
		}
	}
	plan := queue.PlanClaim(all, req)
	for _, r := range plan.Put {
		s.recs[r.ID] = r.Clone()
		if s.OnWrite != nil {
			s.OnWrite(Write{Op: "claim", RecordID: r.ID, Owner: req.Lease.Owner, Token: req.Lease.Token, Current: curTok, NewStatus: r.Status})
		}
	}
	out := make([]queue.Record, len(plan.Claimed))
	for i, r := range plan.Claimed {
		out[i] = r.Clone()
	}
	return out, nil
}

// UpdateBatch implements outbox.Store.
func (s *Store) UpdateBatch(ctx context.Context, lease queue.Lease, ups []outbox.RecordUpdate) ([]outbox.UpdateResult, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	curTok, ok := s.current(lease)
	if !ok {
		return nil, queue.ErrStaleOwner
	}
	// Stage the writes, so the batch is one transaction even for a Fn that
	// inspects the store's other records through its captured state.
	staged := map[string]queue.Record{}
	out := make([]outbox.UpdateResult, len(ups))
	for i, u := range ups {
		r, found := staged[u.ID]
		if !found {
			r, found = s.recs[u.ID]
		}
		switch {
		case !found:
			out[i].Err = outbox.ErrNotFound
			continue
		case !u.Take && !r.HeldBy(lease):
			out[i] = outbox.UpdateResult{Record: r.Clone(), Err: queue.ErrStaleOwner}
			continue
		}
		c := r.Clone()
		if err := u.Fn(&c); err != nil {
			out[i] = outbox.UpdateResult{Record: r.Clone(), Err: err}
			continue
		}
		if c.ID != u.ID || c.Seq != r.Seq || (u.Take && !c.HeldBy(lease)) {
			out[i] = outbox.UpdateResult{Record: r.Clone(), Err: queue.OpError("update", "fn changed the record id or seq, or a take did not lease it", queue.ErrInvalidRecord)}
			continue
		}
		staged[u.ID] = c
		out[i].Record = c.Clone()
	}
	for i, u := range ups {
		if out[i].Err != nil {
			continue
		}
		s.recs[u.ID] = staged[u.ID].Clone()
		if s.OnWrite != nil {
			s.OnWrite(Write{Op: "update", RecordID: u.ID, Owner: lease.Owner, Token: lease.Token, Current: curTok, NewStatus: out[i].Record.Status})
		}
	}
	return out, nil
}

// Amend implements outbox.Store.
func (s *Store) Amend(ctx context.Context, id string, fn func(*queue.Record) error) (queue.Record, error) {
	if err := s.ctxErr(ctx); err != nil {
		return queue.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, found := s.recs[id]
	if !found {
		return queue.Record{}, outbox.ErrNotFound
	}
	c := r.Clone()
	if err := fn(&c); err != nil {
		return r.Clone(), err
	}
	s.recs[id] = c.Clone()
	return c, nil
}

// Delete implements outbox.Store.
func (s *Store) Delete(ctx context.Context, f outbox.Filter) (int, error) {
	if err := s.ctxErr(ctx); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// In Seq order, like List and the IndexedDB store, so a Limit deletes
	// the oldest matches rather than a random subset.
	var match []queue.Record
	for _, r := range s.recs {
		if f.Match(&r) {
			match = append(match, r)
		}
	}
	queue.SortBySeq(match)
	if f.Limit > 0 && len(match) > f.Limit {
		match = match[:f.Limit]
	}
	for _, r := range match {
		if r.PayloadRef != "" {
			delete(s.blobs, r.PayloadRef)
		}
		delete(s.recs, r.ID)
	}
	return len(match), nil
}

// Get implements outbox.Store.
func (s *Store) Get(ctx context.Context, id string) (queue.Record, error) {
	if err := s.ctxErr(ctx); err != nil {
		return queue.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.recs[id]
	if !ok {
		return queue.Record{}, outbox.ErrNotFound
	}
	return r.Clone(), nil
}

// List implements outbox.Store.
func (s *Store) List(ctx context.Context, f outbox.Filter) ([]queue.Record, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []queue.Record
	for _, r := range s.recs {
		if f.Match(&r) {
			out = append(out, r.Clone())
		}
	}
	queue.SortBySeq(out)
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// Payload implements outbox.Store.
func (s *Store) Payload(ctx context.Context, ref string) ([]byte, error) {
	if err := s.ctxErr(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[ref]
	if !ok {
		return nil, outbox.ErrNotFound
	}
	return append([]byte(nil), b...), nil
}

// Status implements outbox.Store.
func (s *Store) Status(ctx context.Context) (outbox.Projection, error) {
	if err := s.ctxErr(ctx); err != nil {
		return outbox.Projection{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := make([]queue.Record, 0, len(s.recs))
	for _, r := range s.recs {
		all = append(all, r)
	}
	return outbox.ProjectRecords(all, s.meta.Clone()), nil
}

// GetLease implements outbox.Store.
func (s *Store) GetLease(ctx context.Context, name string) (queue.Lease, bool, error) {
	if err := s.ctxErr(ctx); err != nil {
		return queue.Lease{}, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[name]
	return l, ok, nil
}

// UpdateLease implements outbox.Store.
func (s *Store) UpdateLease(ctx context.Context, name string, fn func(queue.Lease, bool) (queue.Lease, error)) (queue.Lease, error) {
	if err := s.ctxErr(ctx); err != nil {
		return queue.Lease{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, found := s.leases[name]
	if !found {
		cur.Name = name
	}
	next, err := fn(cur, found)
	if err != nil {
		return cur, err
	}
	next.Name = name
	s.leases[name] = next
	return next, nil
}

// UpdateMeta implements outbox.Store.
func (s *Store) UpdateMeta(ctx context.Context, fn func(*outbox.Meta) error) (outbox.Meta, error) {
	if err := s.ctxErr(ctx); err != nil {
		return outbox.Meta{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.meta.Clone()
	if err := fn(&m); err != nil {
		return s.meta.Clone(), err
	}
	s.meta = m.Clone()
	return m, nil
}
