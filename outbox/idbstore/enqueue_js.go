//go:build js && wasm

package idbstore

import (
	"context"
	"errors"
	"syscall/js"

	"github.com/tabfence/tabfence/idb/raw"
	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/outbox/queue"
)

// decodeAll decodes an array of stored records, skipping (and reporting)
// corrupt ones. raw, when non-nil, receives each decoded record's stored
// object by id, so a rewrite keeps the fields a newer build added.
func (s *Store) decodeAll(arr js.Value, raw map[string]js.Value) []queue.Record {
	n := arr.Length()
	out := make([]queue.Record, 0, n)
	for i := 0; i < n; i++ {
		v := arr.Index(i)
		r, err := decodeRecord(v)
		if err != nil {
			s.sawCorrupt(err)
			continue
		}
		if raw != nil {
			raw[r.ID] = v
		}
		out = append(out, r)
	}
	return out
}

// Enqueue implements outbox.Store: one readwrite transaction over records (and
// blobs when a payload is or was stored by reference). An append — the
// common case, and every record without an operation key — is a single put:
// PlanEnqueue ignores related records for Append and for a record without a
// key, so none are read, and the key generator assigns Seq in the put. The
// dedupe policies first read the same-key records (opKey index) and, for
// replace and merge, the entity's unsettled records (entity index), then
// their blob payloads.
func (s *Store) Enqueue(ctx context.Context, req queue.EnqueueRequest) (queue.EnqueueResult, error) {
	const op = "enqueue"
	if err := ctx.Err(); err != nil {
		return queue.EnqueueResult{}, err
	}
	in := &req.Record
	if in.ID == "" || in.UserID == "" {
		return queue.EnqueueResult{}, queue.ErrInvalidRecord
	}
	needKey := req.Policy.ReadsQueue(in.OperationKey)
	needEntity := req.Policy.ReadsEntity(in.OperationKey)
	withBlobs := needKey || !req.Inlines(len(in.Payload))
	var t *txn
	var err error
	if withBlobs {
		t, err = s.begin(op, raw.ReadWrite, storeRecords, storeBlobs)
	} else {
		t, err = s.begin(op, raw.ReadWrite, storeRecords)
	}
	if err != nil {
		return queue.EnqueueResult{}, err
	}
	recs, err := t.store(storeRecords)
	if err != nil {
		return queue.EnqueueResult{}, t.fail(op, err)
	}
	var blobs js.Value
	if withBlobs {
		if blobs, err = t.store(storeBlobs); err != nil {
			return queue.EnqueueResult{}, t.fail(op, err)
		}
	}
	var raw map[string]js.Value
	var related []queue.Record
	if needKey {
		if related, raw, err = s.related(t, recs, blobs, in, needEntity); err != nil {
			return queue.EnqueueResult{}, t.fail(op, err)
		}
	}
	plan, err := queue.PlanEnqueue(related, req, in.CreatedAt)
	if err != nil {
		return queue.EnqueueResult{}, t.abort(err)
	}
	if !plan.Write {
		t.release()
		return plan.Result, nil
	}
	if err := ctx.Err(); err != nil {
		return queue.EnqueueResult{}, t.abort(err)
	}
	appended := plan.Result.Action == queue.ActionAppended
	if appended {
		plan.Put.Seq = 0 // assigned by the key generator
	}
	var base js.Value
	if !appended {
		base = raw[plan.Put.ID]
	}
	put, err := writePlan(op, recs, blobs, withBlobs, &plan, base)
	if err != nil {
		return queue.EnqueueResult{}, t.fail(op, err)
	}
	if err := hook(op, "written"); err != nil {
		return queue.EnqueueResult{}, t.abort(err)
	}
	t.commit()
	if err := t.finish(); err != nil {
		return queue.EnqueueResult{}, wrapIDB(op, err)
	}
	if appended {
		return appendedSeq(plan.Result, put.Get("result"))
	}
	return plan.Result, nil
}

// related reads, in Enqueue's transaction, the unsettled records of in's
// user with its operation key and, when withEntity, those of its entity,
// with their blob payloads (merge needs the older one). raw receives each
// one's stored object by id. An error aborts the enqueue (t.fail).
func (s *Store) related(t *txn, recs, blobs js.Value, in *queue.Record, withEntity bool) ([]queue.Record, map[string]js.Value, error) {
	var byKey, byEntity js.Value
	ix, err := t.call(recs, "index", jsName(indexOpKey))
	if err == nil {
		byKey, err = t.call(ix, "getAll", opKey(in.UserID, in.OperationKey))
	}
	if err != nil {
		return nil, nil, err
	}
	last := byKey
	if withEntity {
		ix, err := t.call(recs, "index", jsName(indexEntity))
		if err == nil {
			byEntity, err = t.call(ix, "getAll", in.EntityKey())
		}
		if err != nil {
			return nil, nil, err
		}
		last = byEntity
	}
	if err := t.wait(last); err != nil {
		return nil, nil, err
	}
	raw := map[string]js.Value{}
	seen := map[string]bool{}
	var related []queue.Record
	for _, rq := range [2]js.Value{byKey, byEntity} {
		if rq.IsUndefined() {
			continue
		}
		for _, r := range s.decodeAll(rq.Get("result"), raw) {
			if seen[r.ID] || r.UserID != in.UserID || r.Status.Settled() {
				continue
			}
			seen[r.ID] = true
			related = append(related, r)
		}
	}
	return related, raw, s.blobPayloads(t, blobs, related)
}

// blobPayloads loads the blob payloads of related, in the transaction.
func (s *Store) blobPayloads(t *txn, blobs js.Value, related []queue.Record) error {
	var blobReqs []js.Value
	var blobIdx []int
	for i := range related {
		if related[i].PayloadRef != "" {
			r, err := t.call(blobs, "get", related[i].PayloadRef)
			if err != nil {
				return err
			}
			blobReqs = append(blobReqs, r)
			blobIdx = append(blobIdx, i)
		}
	}
	if len(blobReqs) == 0 {
		return nil
	}
	if err := t.wait(blobReqs[len(blobReqs)-1]); err != nil {
		return err
	}
	for j, r := range blobReqs {
		if v := r.Get("result"); !v.IsUndefined() {
			rd := &reader{store: storeBlobs, key: related[blobIdx[j]].PayloadRef}
			related[blobIdx[j]].Payload = rd.bytesOf("payload", v)
			if rd.err != nil {
				s.sawCorrupt(rd.err)
				return rd.err
			}
		}
	}
	return nil
}

// writePlan issues the writes of an enqueue plan: the blob delete and put,
// then the record's put (on top of base, the stored object it replaces, if
// any), whose request it returns.
func writePlan(op string, recs, blobs js.Value, withBlobs bool, plan *queue.EnqueuePlan, base js.Value) (js.Value, error) {
	if plan.DeleteBlob != "" || plan.Put.PayloadRef != "" {
		if !withBlobs {
			return js.Undefined(), &Error{Op: op, Err: errors.New("blob write outside the transaction's scope")}
		}
		if plan.DeleteBlob != "" {
			if _, err := jsglue.Call(blobs, "delete", plan.DeleteBlob); err != nil {
				return js.Undefined(), err
			}
		}
		if plan.Put.PayloadRef != "" {
			if _, err := jsglue.Call(blobs, "put", jsglue.Bytes(plan.Blob), plan.Put.PayloadRef); err != nil {
				return js.Undefined(), err
			}
		}
	}
	return jsglue.Call(recs, "put", encodeRecord(&plan.Put, base))
}

// appendedSeq completes the result of a committed append with the seq the
// key generator gave its record (k: its put request's result).
func appendedSeq(res queue.EnqueueResult, k js.Value) (queue.EnqueueResult, error) {
	if k.Type() != js.TypeNumber {
		return queue.EnqueueResult{}, &Error{Op: "enqueue", Err: errors.New("key generator returned no number")}
	}
	res.Record.Seq = uint64(k.Float())
	return res, nil
}

// AppendTarget is where the loader's hook writes plain appends (see
// outbox.Outbox.PlainAppend and browser's UseLoader): the connection, the
// transaction's store names (the records store first) and options
// (durability), as Enqueue opens its transaction. ok is false once the
// store is closed. A transaction the hook opens after the connection
// closed throws, and the hook then leaves the operation to Enqueue,
// which returns the store's typed error.
func (s *Store) AppendTarget() (db, names, opts js.Value, ok bool) {
	if s.Err() != nil {
		return db, names, opts, false
	}
	return s.db, s.appendNames, s.durOpts, true
}

// EnqueueAborted is the error of an append whose transaction aborted, txErr
// the transaction's error (why IndexedDB aborted it: QuotaExceededError,
// ...; null when the page aborted it); it always matches ErrTxAborted.
// Nothing was written.
func EnqueueAborted(txErr js.Value) error {
	var cause error
	if txErr.Type() == js.TypeObject {
		cause = jsglue.FromJS(txErr)
	}
	return wrapIDB("enqueue", abortError(cause))
}
