package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/memstore"
	"github.com/tabfence/tabfence/outbox/queue"
	"github.com/tabfence/tabfence/wire"
)

// A tab enqueues offline edits, takes the flush lease (after winning the Web
// Lock) and flushes them to the receiver.
func Example() {
	ctx := context.Background()
	store := memstore.New()
	seen := map[string]bool{} // a receiver that dedupes by idempotency key
	server := outbox.TransportFunc(func(_ context.Context, req outbox.Request) (outbox.Response, error) {
		key, _ := wire.ParseIdempotencyKey(req.Header.Get(wire.HeaderIdempotencyKey))
		if seen[key] {
			return outbox.Response{Status: 200, Header: outbox.Header{wire.HeaderReplayed: "true"}}, nil
		}
		seen[key] = true
		return outbox.Response{Status: 201}, nil
	})
	ob, _ := outbox.New(outbox.Config{
		Name: "notes", Store: store, Transport: server,
		Policies: map[string]queue.Policy{
			"add-comment": {Dedupe: queue.Append},        // distinct facts
			"set-title":   {Dedupe: queue.ReplaceLatest}, // last write wins
		},
	})
	ob.Login(context.Background(), outbox.Session{UserID: "alice"})

	ob.Enqueue(ctx, outbox.Op{OperationType: "set-title", OperationKey: "title:n1", EntityID: "n1", Payload: []byte(`"draft"`)})
	r, _ := ob.Enqueue(ctx, outbox.Op{OperationType: "set-title", OperationKey: "title:n1", EntityID: "n1", Payload: []byte(`"final"`)})
	fmt.Println("second title edit:", r.Action)
	ob.Enqueue(ctx, outbox.Op{OperationType: "add-comment", EntityID: "n1", Payload: []byte(`"nice"`)})

	lease, _ := ob.Acquire(ctx, "tab-1", true) // steal=true: we hold the Web Lock
	lease.Resource, lease.FenceToken = "outbox:notes", 1
	rep, err := ob.Flush(ctx, lease)
	fmt.Println("acked:", rep.Acked, "err:", err)
	st, _ := ob.Status(ctx)
	fmt.Println("pending:", st.Pending, "acked:", st.Acked)
	// Output:
	// second title edit: replaced
	// acked: 2 err: <nil>
	// pending: 0 acked: 2
}

// Dead letters and conflicts wait for the app, which retries or discards them.
func ExampleOutbox_DeadLetters() {
	ctx := context.Background()
	ob, _ := outbox.New(outbox.Config{
		Store: memstore.New(), MaxAttempts: 1,
		Transport: outbox.TransportFunc(func(context.Context, outbox.Request) (outbox.Response, error) {
			return outbox.Response{Status: 503}, nil
		}),
		Policies: map[string]queue.Policy{"pay": {Dedupe: queue.Append}},
	})
	ob.Login(context.Background(), outbox.Session{UserID: "bob"})
	ob.Enqueue(ctx, outbox.Op{OperationType: "pay", Payload: []byte(`{"cents":100}`)})
	lease, _ := ob.Acquire(ctx, "tab-1", true)
	ob.Flush(ctx, lease)
	dead, _ := ob.DeadLetters(ctx)
	fmt.Println(len(dead), dead[0].Status, dead[0].LastError.Code)
	fmt.Println(ob.Discard(ctx, dead[0].ID))
	// Output:
	// 1 dead_letter http_503
	// <nil>
}

// An outage costs the queue nothing. A send that fails because the device
// is offline (the transport wraps ErrOffline) is not charged and stops the
// flush; a failure while the device believed it was online (the server was
// unreachable) is charged and backs off, until the device reconnects:
// Reconnected ends that backoff, and the next flush sends it at once.
func ExampleOutbox_Reconnected() {
	ctx := context.Background()
	network := "offline"
	store := memstore.New()
	clock := &manualClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	ob, _ := outbox.New(outbox.Config{
		Store: store, Clock: clock,
		// Seeded jitter: the backoff drawn below is the same on every run.
		Backoff: &outbox.Backoff{Base: time.Minute, Rand: rand.New(rand.NewPCG(1, 2))},
		Transport: outbox.TransportFunc(func(context.Context, outbox.Request) (outbox.Response, error) {
			switch network {
			case "offline":
				return outbox.Response{}, errors.Join(outbox.ErrOffline, errors.New("TypeError: Failed to fetch"))
			case "unreachable":
				return outbox.Response{}, errors.New("TypeError: Failed to fetch")
			}
			return outbox.Response{Status: 201}, nil
		}),
		Policies: map[string]queue.Policy{"note": {Dedupe: queue.Append}},
	})
	ob.Login(context.Background(), outbox.Session{UserID: "carol"})
	r, _ := ob.Enqueue(ctx, outbox.Op{OperationType: "note", Payload: []byte(`"hi"`)})
	lease, _ := ob.Acquire(ctx, "tab-1", true)

	_, err := ob.Flush(ctx, lease)
	rec, _ := store.Get(ctx, r.ID)
	fmt.Println(errors.Is(err, outbox.ErrOffline), rec.Status, rec.Attempts)

	network = "unreachable"
	ob.Flush(ctx, lease)
	rec, _ = store.Get(ctx, r.ID)
	fmt.Println(rec.Status, rec.Attempts, rec.LastError.Code)

	network = "up"
	clock.t = clock.t.Add(time.Millisecond)
	ob.Flush(ctx, lease) // still backing off: nothing is sent
	rec, _ = store.Get(ctx, r.ID)
	fmt.Println(rec.Status)
	ob.Reconnected() // the browser's online event
	ob.Flush(ctx, lease)
	rec, _ = store.Get(ctx, r.ID)
	fmt.Println(rec.Status, rec.Attempts)
	// Output:
	// true pending 0
	// retryable_failed 1 network
	// retryable_failed
	// acked 2
}

// manualClock is a Clock that moves only when told.
type manualClock struct{ t time.Time }

func (c *manualClock) Now() time.Time { return c.t }
