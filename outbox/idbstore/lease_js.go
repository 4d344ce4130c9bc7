//go:build js && wasm

package idbstore

import (
	"context"
	"syscall/js"

	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// GetLease implements outbox.Store.
func (s *Store) GetLease(ctx context.Context, name string) (queue.Lease, bool, error) {
	const op = "get lease"
	t, err := s.beginCtx(ctx, op, raw.ReadOnly, storeLeases)
	if err != nil {
		return queue.Lease{}, false, err
	}
	defer t.release()
	r, err := readLease(t, name)
	if err == nil {
		err = t.wait(r)
	}
	if err != nil {
		return queue.Lease{}, false, wrapIDB(op, err)
	}
	l, found, err := leaseResult(r)
	if err != nil {
		s.sawCorrupt(err)
	}
	return l, found, err
}

// UpdateLease implements outbox.Store.
func (s *Store) UpdateLease(ctx context.Context, name string, fn func(queue.Lease, bool) (queue.Lease, error)) (queue.Lease, error) {
	const op = "update lease"
	t, err := s.beginCtx(ctx, op, raw.ReadWrite, storeLeases)
	if err != nil {
		return queue.Lease{}, err
	}
	r, err := readLease(t, name)
	if err == nil {
		err = t.wait(r)
	}
	if err != nil {
		return queue.Lease{}, t.fail(op, err)
	}
	base := r.Get("result")
	cur, found, err := leaseResult(r)
	if err != nil {
		s.sawCorrupt(err)
		return queue.Lease{}, t.abort(err)
	}
	if !found {
		cur.Name = name
	}
	next, err := fn(cur, found)
	if err != nil {
		return cur, t.abort(err)
	}
	next.Name = name
	leases, err := t.store(storeLeases)
	if err == nil {
		_, err = t.call(leases, "put", encodeLease(next, base))
	}
	if err != nil {
		return cur, t.fail(op, err)
	}
	if err := t.end(op); err != nil {
		return cur, err
	}
	return next, nil
}

// UpdateMeta implements outbox.Store.
func (s *Store) UpdateMeta(ctx context.Context, fn func(*outbox.Meta) error) (outbox.Meta, error) {
	const op = "update meta"
	t, err := s.beginCtx(ctx, op, raw.ReadWrite, storeMeta)
	if err != nil {
		return outbox.Meta{}, err
	}
	ms, err := t.store(storeMeta)
	var r js.Value
	if err == nil {
		r, err = t.call(ms, "get", metaKey)
	}
	if err == nil {
		err = t.wait(r)
	}
	if err != nil {
		return outbox.Meta{}, t.fail(op, err)
	}
	base := r.Get("result")
	var cur outbox.Meta
	if !base.IsUndefined() {
		if cur, err = decodeMeta(base); err != nil {
			s.sawCorrupt(err)
			return outbox.Meta{}, t.abort(err)
		}
	}
	m := cur.Clone()
	if err := fn(&m); err != nil {
		return cur, t.abort(err)
	}
	if !base.IsUndefined() && metaEqual(cur, m) {
		// A read (the flusher reads the pause state this way): no write,
		// so no durable commit to wait for.
		t.release()
		return m, nil
	}
	if _, err := t.call(ms, "put", encodeMeta(m, base), metaKey); err != nil {
		return cur, t.fail(op, err)
	}
	if err := t.end(op); err != nil {
		return cur, err
	}
	return m, nil
}

func metaEqual(a, b outbox.Meta) bool {
	if a.Paused != b.Paused || !a.LastFlushAt.Equal(b.LastFlushAt) || len(a.AuthPaused) != len(b.AuthPaused) || !metaSessionEqual(&a, &b) {
		return false
	}
	for i := range a.AuthPaused {
		if a.AuthPaused[i] != b.AuthPaused[i] {
			return false
		}
	}
	if (a.LastError == nil) != (b.LastError == nil) {
		return false
	}
	return a.LastError == nil || (a.LastError.Code == b.LastError.Code && a.LastError.Message == b.LastError.Message &&
		a.LastError.Status == b.LastError.Status && a.LastError.At.Equal(b.LastError.At))
}
