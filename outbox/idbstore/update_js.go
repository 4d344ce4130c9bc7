//go:build js && wasm

package idbstore

import (
	"bytes"
	"context"
	"syscall/js"

	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// UpdateBatch implements outbox.Store: the lease row and every record read with
// requests issued together (only the last awaited), the Fns run in order in
// Go, then one put per changed record, one commit.
func (s *Store) UpdateBatch(ctx context.Context, lease queue.Lease, ups []outbox.RecordUpdate) ([]outbox.UpdateResult, error) {
	const op = "update batch"
	t, err := s.beginCtx(ctx, op, raw.ReadWrite, storeRecords, storeLeases)
	if err != nil {
		return nil, err
	}
	lr, err := readLease(t, lease.Name)
	if err != nil {
		return nil, t.fail(op, err)
	}
	recs, err := t.store(storeRecords)
	if err != nil {
		return nil, t.fail(op, err)
	}
	ix, err := idIndex(t, recs)
	if err != nil {
		return nil, t.fail(op, err)
	}
	reads := make(map[string]js.Value, len(ups))
	last := lr
	for _, u := range ups {
		if _, ok := reads[u.ID]; ok {
			continue
		}
		rr, err := getIn(t, ix, u.ID)
		if err != nil {
			return nil, t.fail(op, err)
		}
		reads[u.ID], last = rr, rr
	}
	if err := t.wait(last); err != nil {
		return nil, t.fail(op, err)
	}
	cur, found, err := leaseResult(lr)
	if err != nil {
		s.sawCorrupt(err)
		return nil, t.abort(err)
	}
	if !queue.CurrentLease(cur, found, lease) {
		return nil, t.abort(queue.ErrStaleOwner)
	}
	states := s.decodeReads(reads)
	out, dirty := applyUpdates(op, lease, ups, states)
	if len(dirty) == 0 {
		t.release()
		return out, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, t.abort(err)
	}
	for _, u := range ups { // in batch order: deterministic
		if !dirty[u.ID] {
			continue
		}
		dirty[u.ID] = false
		st := states[u.ID]
		if _, err := t.call(recs, "put", encodeOver(&st.rec, st.raw, st.payloadKept())); err != nil {
			return nil, t.fail(op, err)
		}
	}
	if err := t.end(op); err != nil {
		return nil, err
	}
	return out, nil
}

// updateState is one record of an UpdateBatch: as read (rec, raw), then
// as its updates left it.
type updateState struct {
	rec queue.Record
	raw js.Value
	ok  bool
	err error // ErrNotFound, or why the stored record does not decode
	// stored is the payload as read (raw holds it).
	stored []byte
}

// payloadKept says the updates left the payload as stored.
func (st *updateState) payloadKept() bool {
	return (st.rec.Payload == nil) == (st.stored == nil) && bytes.Equal(st.rec.Payload, st.stored)
}

// decodeReads decodes the records UpdateBatch read, by id.
func (s *Store) decodeReads(reads map[string]js.Value) map[string]*updateState {
	states := make(map[string]*updateState, len(reads))
	for id, rr := range reads {
		st := &updateState{err: outbox.ErrNotFound}
		if v := rr.Get("result"); !v.IsUndefined() {
			r, err := decodeRecord(v)
			if err != nil {
				// A corrupt record is reported, never fatal to the others.
				s.sawCorrupt(err)
				st.err = err
			} else {
				st.rec, st.raw, st.ok, st.stored = r, v, true, r.Payload
			}
		}
		states[id] = st
	}
	return states
}

// applyUpdates runs the updates' Fns in order on states and returns each
// one's result and the ids of the records changed.
func applyUpdates(op string, lease queue.Lease, ups []outbox.RecordUpdate, states map[string]*updateState) ([]outbox.UpdateResult, map[string]bool) {
	out := make([]outbox.UpdateResult, len(ups))
	dirty := map[string]bool{}
	for i, u := range ups {
		st := states[u.ID]
		if !st.ok {
			out[i].Err = st.err
			continue
		}
		c := st.rec.Clone()
		if err := applyUpdate(op, lease, u, &st.rec, &c); err != nil {
			out[i] = outbox.UpdateResult{Record: st.rec.Clone(), Err: err}
			continue
		}
		st.rec = c
		dirty[u.ID] = true
		out[i].Record = c.Clone()
	}
	return out, dirty
}

// applyUpdate runs u.Fn on c, a copy of rec, and says why the change is
// refused, if it is: rec is not held by lease (unless u takes it), Fn
// failed, or Fn changed what it must not.
func applyUpdate(op string, lease queue.Lease, u outbox.RecordUpdate, rec, c *queue.Record) error {
	if !u.Take && !rec.HeldBy(lease) {
		return queue.ErrStaleOwner
	}
	if err := u.Fn(c); err != nil {
		return err
	}
	if c.ID != u.ID || c.Seq != rec.Seq || (u.Take && !c.HeldBy(lease)) {
		return queue.OpError(op, "fn changed the record id or seq, or a take did not lease it", queue.ErrInvalidRecord)
	}
	return nil
}

// Amend implements outbox.Store: one record changed by fn in one transaction,
// without a lease (fn itself refuses records that are in flight).
func (s *Store) Amend(ctx context.Context, id string, fn func(*queue.Record) error) (queue.Record, error) {
	const op = "amend"
	t, err := s.beginCtx(ctx, op, raw.ReadWrite, storeRecords)
	if err != nil {
		return queue.Record{}, err
	}
	recs, err := t.store(storeRecords)
	if err != nil {
		return queue.Record{}, t.fail(op, err)
	}
	rr, err := getByID(t, recs, id)
	if err != nil {
		return queue.Record{}, t.fail(op, err)
	}
	if err := t.wait(rr); err != nil {
		return queue.Record{}, t.fail(op, err)
	}
	v := rr.Get("result")
	if v.IsUndefined() {
		return queue.Record{}, t.abort(outbox.ErrNotFound)
	}
	r, err := decodeRecord(v)
	if err != nil {
		s.sawCorrupt(err)
		return queue.Record{}, t.abort(err)
	}
	c := r.Clone()
	if err := fn(&c); err != nil {
		return r, t.abort(err)
	}
	if err := ctx.Err(); err != nil {
		return r, t.abort(err)
	}
	if c.ID != id || c.Seq != r.Seq {
		return r, t.abort(queue.OpError(op, "fn changed the record id or seq", queue.ErrInvalidRecord))
	}
	if _, err := t.call(recs, "put", encodeRecord(&c, v)); err != nil {
		return r, t.fail(op, err)
	}
	if err := t.end(op); err != nil {
		return r, err
	}
	return c, nil
}

// Delete implements outbox.Store. Records go in Seq order, so a Limit deletes the
// oldest matches. Corrupt records never match.
func (s *Store) Delete(ctx context.Context, f outbox.Filter) (int, error) {
	const op = "delete"
	t, err := s.beginCtx(ctx, op, raw.ReadWrite, storeRecords, storeBlobs)
	if err != nil {
		return 0, err
	}
	list, err := s.query(t, op, f)
	if err != nil {
		return 0, t.fail(op, err)
	}
	if len(list) == 0 {
		t.release()
		return 0, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, t.abort(err)
	}
	recs, _ := t.store(storeRecords)
	blobs, err := t.store(storeBlobs)
	if err != nil {
		return 0, t.fail(op, err)
	}
	for i := range list {
		if list[i].PayloadRef != "" {
			if _, err := t.call(blobs, "delete", list[i].PayloadRef); err != nil {
				return 0, t.fail(op, err)
			}
		}
		if _, err := t.call(recs, "delete", float64(list[i].Seq)); err != nil {
			return 0, t.fail(op, err)
		}
	}
	if err := t.end(op); err != nil {
		return 0, err
	}
	return len(list), nil
}
