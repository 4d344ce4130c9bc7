//go:build js && wasm

package outbox

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"syscall/js"
	"testing"
	"time"

	"github.com/tabfence/tabfence/jsglue"
	"github.com/tabfence/tabfence/jsglue/loader"
)

// doneCall is one call of StartEnqueue's done callback.
type doneCall struct {
	k          float64
	key, error js.Value
}

// loaderWrite returns the loader's FAST.enqueue (from tabfence.js itself)
// and a done callback that reports its calls on the channel, one per
// enqueue: the loader calls done(k, key, error) for an abort, and
// done([k, key, k, key...]) for the commits of a burst.
func loaderWrite(t *testing.T) (write js.Value, done *jsglue.Callback, calls chan doneCall) {
	t.Helper()
	write = js.Global().Call("eval", loader.FastPath()).Get("enqueue")
	if write.Type() != js.TypeFunction {
		t.Fatal("the loader's FAST has no enqueue")
	}
	calls = make(chan doneCall, 64)
	done = jsglue.NewCallback(func(_ js.Value, a []js.Value) any {
		if a[0].Type() == js.TypeObject {
			for i := 0; i+1 < a[0].Length(); i += 2 {
				calls <- doneCall{k: a[0].Index(i).Float(), key: a[0].Index(i + 1), error: js.Undefined()}
			}
			return nil
		}
		c := doneCall{k: a[0].Float(), key: a[1]}
		if len(a) > 2 {
			c.error = a[2]
		}
		calls <- c
		return nil
	})
	t.Cleanup(done.Release)
	return write, done, calls
}

// The record the loader writes for StartEnqueue is the one Enqueue writes:
// the same stored fields (index fields included) and the same decoded
// record; its promise resolves with {id, action} and done gets the seq.
// Appends with a blob payload, and operations a dedupe policy must read
// for, are not started.
func TestStartEnqueueWritesWhatEnqueueWrites(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, "tabfence-outbox:start-enqueue", WithDurability("strict"))
	write, done, calls := loaderWrite(t)
	at := time.UnixMilli(1_700_000_000_123).UTC()
	req := func(id string) EnqueueRequest {
		return EnqueueRequest{Policy: Policy{Dedupe: Append}, Record: Record{
			ID: id, OperationKey: "k\x00", IdempotencyKey: "idem-" + id, EntityType: "note", EntityID: "é",
			OperationType: "put-note", Payload: []byte(`{"a":1}`), PayloadSchemaVersion: 2,
			Status: StatusPending, MaxAttempts: 5, NextAttemptAt: at, DependencyIDs: []string{"d1"},
			CreatedAt: at, UpdatedAt: at, UserID: "u", TenantID: "t", AuthGeneration: 3,
		}}
	}
	// Reference: Enqueue's own write.
	ref, err := s.Enqueue(ctx, req("ref"))
	if err != nil {
		t.Fatal(err)
	}
	buf := js.Global().Get("Uint8Array").New(4096)
	p, promise, started, err := s.StartEnqueue(ctx, req("fast"), write, buf, done.Value, 7, true)
	if !started || err != nil {
		t.Fatalf("not started: %v %v", started, err)
	}
	v, err := jsglue.Await(ctx, promise)
	if err != nil || v.Get("id").String() != "fast" || v.Get("action").String() != string(ActionAppended) {
		t.Fatalf("promise: %v %v", err, v)
	}
	c := <-calls
	if c.k != 7 || c.key.Type() != js.TypeNumber {
		t.Fatalf("done(%v, %v)", c.k, c.key)
	}
	res, err := p.Committed(c.key)
	if err != nil || res.ID != "fast" || res.Record.Seq != ref.Record.Seq+1 {
		t.Fatalf("committed: %+v %v (ref seq %d)", res, err, ref.Record.Seq)
	}
	stored := func(id string) js.Value {
		t.Helper()
		tx, err := s.begin("test", "readonly", storeRecords)
		if err != nil {
			t.Fatal(err)
		}
		recs, _ := tx.store(storeRecords)
		r, err := getByID(tx, recs, id)
		if err == nil {
			err = tx.wait(r)
		}
		tx.release()
		if err != nil {
			t.Fatal(err)
		}
		return r.Get("result")
	}
	a, b := stored("ref"), stored("fast")
	keys := func(o js.Value) []string {
		ks := js.Global().Get("Object").Call("keys", o)
		out := make([]string, ks.Length())
		for i := range out {
			out[i] = ks.Index(i).String()
		}
		slices.Sort(out)
		return out
	}
	if ka, kb := keys(a), keys(b); !slices.Equal(ka, kb) {
		t.Fatalf("stored fields differ:\nEnqueue      %v\nStartEnqueue %v", ka, kb)
	}
	ra, err1 := decodeRecord(a)
	rb, err2 := decodeRecord(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	rb.ID, rb.IdempotencyKey, rb.Seq = ra.ID, ra.IdempotencyKey, ra.Seq
	if !reflect.DeepEqual(ra, rb) {
		t.Fatalf("decoded records differ:\nEnqueue      %+v\nStartEnqueue %+v", ra, rb)
	}

	// Not started: a blob payload, a policy that reads the queue, and a
	// record that does not fit buf.
	big := req("big")
	big.InlineLimit = 3
	if _, _, started, err := s.StartEnqueue(ctx, big, write, buf, done.Value, 8, true); started || err != nil {
		t.Fatalf("blob payload started: %v %v", started, err)
	}
	rl := req("rl")
	rl.Policy.Dedupe = ReplaceLatest
	if _, _, started, err := s.StartEnqueue(ctx, rl, write, buf, done.Value, 9, true); started || err != nil {
		t.Fatalf("replace-latest started: %v %v", started, err)
	}
	long := req("long")
	long.Record.Payload = make([]byte, 4000)
	if _, _, started, err := s.StartEnqueue(ctx, long, write, buf, done.Value, 10, true); started || err != nil {
		t.Fatalf("a record larger than buf started: %v %v", started, err)
	}
}

// A transaction aborted after the loader's put: the promise rejects with
// what done returns, done gets no key and the transaction's error, and
// Aborted is an ErrTxAborted; nothing is written.
func TestStartEnqueueAborted(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, "tabfence-outbox:start-enqueue-abort")
	write := js.Global().Call("eval", loader.FastPath()).Get("enqueue")
	var p PendingEnqueue
	var abortErr error
	done := jsglue.NewCallback(func(_ js.Value, a []js.Value) any {
		if !a[1].IsUndefined() {
			t.Error("done got a key for an aborted transaction")
			return nil
		}
		abortErr = p.Aborted(a[2])
		return jsglue.ToJS(abortErr)
	})
	defer done.Release()
	js.Global().Call("eval", `(() => {
  const put = IDBObjectStore.prototype.put;
  globalThis.__restorePut = () => { IDBObjectStore.prototype.put = put; };
  IDBObjectStore.prototype.put = function (...a) { const r = put.apply(this, a); this.transaction.abort(); return r; };
})()`)
	req := EnqueueRequest{Policy: Policy{Dedupe: Append}, Record: Record{ID: "x", IdempotencyKey: "i", UserID: "u",
		Status: StatusPending, Payload: []byte("{}"), CreatedAt: time.Now(), UpdatedAt: time.Now()}}
	p, promise, started, err := s.StartEnqueue(ctx, req, write, js.Global().Get("Uint8Array").New(1024), done.Value, 1, true)
	js.Global().Call("__restorePut")
	if !started || err != nil {
		t.Fatalf("not started: %v %v", started, err)
	}
	if _, err := jsglue.Await(ctx, promise); err == nil {
		t.Fatal("an aborted enqueue resolved")
	}
	if !errors.Is(abortErr, ErrTxAborted) {
		t.Fatalf("Aborted: %v", abortErr)
	}
	if _, err := s.Get(ctx, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the aborted record exists: %v", err)
	}
}
