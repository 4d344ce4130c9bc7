//go:build js && wasm

package idbstore

import (
	"context"
	"syscall/js"
	"time"

	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// query reads the records matching f in Seq order (Limit applied). It
// narrows with an index where one fits: ids by key, statuses by the status
// index, a user by the user index; otherwise it reads the whole store, so
// that corrupt records of any shape are met and reported.
func (s *Store) query(t *txn, op string, f outbox.Filter) ([]queue.Record, error) {
	recs, err := t.store(storeRecords)
	if err != nil {
		return nil, err
	}
	reqs, err := queryRequests(t, recs, f)
	if err != nil {
		return nil, err
	}
	if err := t.wait(reqs[len(reqs)-1]); err != nil {
		return nil, err
	}
	var out []queue.Record
	seen := map[string]bool{}
	for _, rq := range reqs {
		v := rq.Get("result")
		if v.IsUndefined() {
			continue
		}
		var got []queue.Record
		if len(f.IDs) > 0 {
			r, err := decodeRecord(v)
			if err != nil {
				s.sawCorrupt(err)
				continue
			}
			got = []queue.Record{r}
		} else {
			got = s.decodeAll(v, nil)
		}
		for i := range got {
			if !seen[got[i].ID] && f.Match(&got[i]) {
				seen[got[i].ID] = true
				out = append(out, got[i])
			}
		}
	}
	queue.SortBySeq(out)
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// queryRequests issues the reads of a query by the narrowest index f
// allows: by id, by status, by user, or the whole store.
func queryRequests(t *txn, recs js.Value, f outbox.Filter) ([]js.Value, error) {
	var reqs []js.Value
	switch {
	case len(f.IDs) > 0:
		ix, err := idIndex(t, recs)
		if err != nil {
			return nil, err
		}
		for _, id := range f.IDs {
			r, err := getIn(t, ix, id)
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, r)
		}
	case len(f.Statuses) > 0:
		ix, err := t.call(recs, "index", indexStatus)
		if err != nil {
			return nil, err
		}
		done := map[queue.Status]bool{}
		for _, st := range f.Statuses {
			if done[st] {
				continue
			}
			done[st] = true
			r, err := t.call(ix, "getAll", string(st))
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, r)
		}
	case f.UserID != "":
		ix, err := t.call(recs, "index", indexUser)
		if err != nil {
			return nil, err
		}
		r, err := t.call(ix, "getAll", f.UserID)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, r)
	default:
		r, err := t.call(recs, "getAll")
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, r)
	}
	return reqs, nil
}

// Get implements outbox.Store.
func (s *Store) Get(ctx context.Context, id string) (queue.Record, error) {
	const op = "get"
	t, err := s.beginCtx(ctx, op, raw.ReadOnly, storeRecords)
	if err != nil {
		return queue.Record{}, err
	}
	defer t.release()
	recs, err := t.store(storeRecords)
	if err != nil {
		return queue.Record{}, wrapIDB(op, err)
	}
	r, err := getByID(t, recs, id)
	if err != nil {
		return queue.Record{}, wrapIDB(op, err)
	}
	if err := t.wait(r); err != nil {
		return queue.Record{}, wrapIDB(op, err)
	}
	v := r.Get("result")
	if v.IsUndefined() {
		return queue.Record{}, outbox.ErrNotFound
	}
	rec, err := decodeRecord(v)
	if err != nil {
		s.sawCorrupt(err)
		return queue.Record{}, err
	}
	return rec, nil
}

// List implements outbox.Store. Corrupt records are skipped and reported (Corrupt,
// WithOnCorrupt), never fatal.
func (s *Store) List(ctx context.Context, f outbox.Filter) ([]queue.Record, error) {
	const op = "list"
	t, err := s.beginCtx(ctx, op, raw.ReadOnly, storeRecords)
	if err != nil {
		return nil, err
	}
	defer t.release()
	out, err := s.query(t, op, f)
	return out, wrapIDB(op, err)
}

// Payload implements outbox.Store.
func (s *Store) Payload(ctx context.Context, ref string) ([]byte, error) {
	const op = "payload"
	t, err := s.beginCtx(ctx, op, raw.ReadOnly, storeBlobs)
	if err != nil {
		return nil, err
	}
	defer t.release()
	blobs, err := t.store(storeBlobs)
	if err != nil {
		return nil, wrapIDB(op, err)
	}
	r, err := t.call(blobs, "get", ref)
	if err != nil {
		return nil, wrapIDB(op, err)
	}
	if err := t.wait(r); err != nil {
		return nil, wrapIDB(op, err)
	}
	v := r.Get("result")
	if v.IsUndefined() {
		return nil, outbox.ErrNotFound
	}
	rd := &reader{store: storeBlobs, key: ref}
	b := rd.bytesOf("payload", v)
	if rd.err != nil {
		s.sawCorrupt(rd.err)
		return nil, rd.err
	}
	return b, nil
}

// Status implements outbox.Store: counts by status and the oldest unsettled
// record from the status index, and the metadata, in one readonly
// transaction. It reads no record beyond the first of each waiting or
// in-flight status, so its cost does not grow with the queue: every tab
// reads it on every change, and a backlog of thousands of offline
// mutations must not make each read decode them all.
func (s *Store) Status(ctx context.Context) (outbox.Projection, error) {
	return s.StatusSchema(ctx, queue.SchemaGate{})
}

// projected are the statuses a Projection counts, in its field order.
var projected = []queue.Status{queue.StatusPending, queue.StatusLeased, queue.StatusSending, queue.StatusFailed, queue.StatusDeadLetter, queue.StatusConflict, queue.StatusTerminalFailed, queue.StatusAcked}

// StatusSchema is Status that also counts the unsettled records gate leaves
// alone (Projection.Unsupported; none when gate.Version <= 0): a count of
// the records of another schema than gate's from the schema index, then
// (only when there are such records and unsettled ones) what gate decides
// of the fewer of the two sets (countUnsupported). Outbox.Status uses it
// instead of a scan.
func (s *Store) StatusSchema(ctx context.Context, gate queue.SchemaGate) (outbox.Projection, error) {
	const op = "status"
	t, err := s.beginCtx(ctx, op, raw.ReadOnly, storeRecords, storeMeta)
	if err != nil {
		return outbox.Projection{}, err
	}
	defer t.release()
	rd, err := issueStatusReads(t, gate)
	if err != nil {
		return outbox.Projection{}, wrapIDB(op, err)
	}
	p, n, err := s.projectStatus(rd)
	if err != nil {
		return outbox.Projection{}, err
	}
	p.Pending, p.Sending, p.Failed = n[0], n[1]+n[2], n[3]
	p.DeadLetter, p.Conflict, p.Terminal, p.Acked = n[4], n[5], n[6], n[7]
	if gate.Version <= 0 {
		return p, nil
	}
	unsettled := n[0] + n[1] + n[2] + n[3]
	if other := resultInt(rd.newer) + resultInt(rd.older); other > 0 && unsettled > 0 {
		if p.Unsupported, err = s.countUnsupported(t, rd.recs, gate, unsettled, other); err != nil {
			return outbox.Projection{}, err
		}
	}
	return p, nil
}

// statusReads are the requests of a status read: per projected status a
// count and, for an unsettled one, its first record; the meta object; the
// latest acked record; and, with a schema gate, the counts of records of
// a newer and of an older schema.
type statusReads struct {
	counts, firsts                  [8]js.Value
	recs, mr, newer, older, lastAck js.Value
}

// issueStatusReads issues every read of a status at once and awaits the
// last: requests of one transaction complete in order.
func issueStatusReads(t *txn, gate queue.SchemaGate) (statusReads, error) {
	var r statusReads
	last, err := jsglue.Try(func() js.Value {
		r.recs = t.tx.JS().Call("objectStore", storeRecords)
		r.mr = t.tx.JS().Call("objectStore", storeMeta).Call("get", metaKey)
		sx := r.recs.Call("index", indexStatus)
		// The acked record of the highest seq (LastAckAt).
		r.lastAck = sx.Call("openCursor", keyRange().Call("only", string(queue.StatusAcked)), "prev")
		last := r.lastAck
		for i, st := range projected {
			r.counts[i] = sx.Call("count", string(st))
			last = r.counts[i]
			if !st.Settled() {
				r.firsts[i] = sx.Call("get", string(st))
				last = r.firsts[i]
			}
		}
		if gate.Version > 0 {
			schemaIx := r.recs.Call("index", indexSchema)
			r.newer = schemaIx.Call("count", keyRange().Call("lowerBound", gate.Version, true))
			r.older = schemaIx.Call("count", keyRange().Call("upperBound", gate.Version, true))
			last = r.older
		}
		return last
	})
	if err == nil {
		err = t.wait(last)
	}
	return r, err
}

// projectStatus reads the answers of issueStatusReads: the meta, the
// oldest unsettled record's creation and the last ack, and the counts by
// status (in projected's order).
func (s *Store) projectStatus(r statusReads) (p outbox.Projection, n [8]int, err error) {
	if v := r.mr.Get("result"); !v.IsUndefined() {
		if p.Meta, err = decodeMeta(v); err != nil {
			s.sawCorrupt(err)
			return p, n, err
		}
	}
	for i := range r.counts {
		if v := r.counts[i].Get("result"); v.Type() == js.TypeNumber {
			n[i] = v.Int()
		}
		if r.firsts[i].IsUndefined() {
			continue
		}
		v := r.firsts[i].Get("result")
		if v.Type() != js.TypeObject {
			continue
		}
		rd := newReader(storeRecords, v)
		at := rd.time("createdAt")
		if rd.err != nil {
			s.sawCorrupt(rd.err)
			return p, n, rd.err
		}
		if p.OldestPendingAt.IsZero() || at.Before(p.OldestPendingAt) {
			p.OldestPendingAt = at
		}
	}
	// A hint for the watchdog, not data: an odd value is left out.
	if c := r.lastAck.Get("result"); c.Type() == js.TypeObject {
		if v := c.Get("value"); v.Type() == js.TypeObject {
			if ms := v.Get("ackedAt"); ms.Type() == js.TypeNumber && ms.Float() > 0 && ms.Float() < 8.64e15 {
				p.LastAckAt = time.UnixMilli(int64(ms.Float()))
			}
		}
	}
	return p, n, nil
}

func resultInt(req js.Value) int {
	if v := req.Get("result"); v.Type() == js.TypeNumber {
		return v.Int()
	}
	return 0
}

// countUnsupported counts, within t, the unsettled records gate leaves
// alone, reading whichever is fewer: the unsettled records (by the status
// index), or the records of another schema than gate's (both sides of
// gate.Version in the schema index, acked history included). After a
// schema bump the old schema's acked history only grows, the backlog is
// usually short; during a long offline spell the reverse.
func (s *Store) countUnsupported(t *txn, recs js.Value, gate queue.SchemaGate, unsettled, other int) (int, error) {
	const op = "status"
	var reqs []js.Value
	var last js.Value
	_, err := jsglue.Try(func() js.Value {
		if unsettled <= other {
			sx := recs.Call("index", indexStatus)
			for _, st := range projected {
				if !st.Settled() {
					last = sx.Call("getAll", string(st))
					reqs = append(reqs, last)
				}
			}
		} else {
			ix := recs.Call("index", indexSchema)
			reqs = append(reqs, ix.Call("getAll", keyRange().Call("lowerBound", gate.Version, true)))
			last = ix.Call("getAll", keyRange().Call("upperBound", gate.Version, true))
			reqs = append(reqs, last)
		}
		return last
	})
	if err == nil {
		err = t.wait(last)
	}
	if err != nil {
		return 0, wrapIDB(op, err)
	}
	n := 0
	for _, res := range reqs {
		arr := res.Get("result")
		for i, k := 0, arr.Length(); i < k; i++ {
			rd := newReader(storeRecords, arr.Index(i))
			rec := queue.Record{Status: queue.Status(rd.str("status")), PayloadSchemaVersion: rd.int("payloadSchemaVersion")}
			if rd.err == nil && !rec.Status.Settled() && gate.Action(&rec) == queue.SchemaMigrate {
				// Only a failed migration's error can leave it alone.
				rec.LastError = rd.errorInfo("lastError")
			}
			if rd.err != nil {
				s.sawCorrupt(rd.err)
				return 0, rd.err
			}
			if gate.Unsupported(&rec) {
				n++
			}
		}
	}
	return n, nil
}

// keyRange is the page's IDBKeyRange.
func keyRange() js.Value { return js.Global().Get("IDBKeyRange") }
