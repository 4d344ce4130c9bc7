//go:build js && wasm

package idbstore_test

import (
	"context"
	"strconv"
	"time"

	"github.com/tabfence/tabfence/outbox"
	"github.com/tabfence/tabfence/outbox/queue"
)

// benchEnqueue enqueues n small append records (distinct ids, one user, no
// entity) one after another, each a durable Enqueue that returns after its
// commit, and returns the total time: the figure to set beside a raw
// JavaScript loop of one put transaction per record. Records are left in
// the store; use a fresh database per run.
func benchEnqueue(ctx context.Context, store outbox.Store, n int) (time.Duration, error) {
	payload := []byte(`{"op":"bench","text":"hello"}`)
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	start := time.Now()
	for i := 0; i < n; i++ {
		now := time.Now()
		id := "bench-" + stamp + "-" + strconv.Itoa(i)
		_, err := store.Enqueue(ctx, queue.EnqueueRequest{
			Record: queue.Record{
				ID: id, IdempotencyKey: id, OperationType: "bench", Payload: payload,
				PayloadSchemaVersion: 1, Status: queue.StatusPending, MaxAttempts: 10,
				NextAttemptAt: now, CreatedAt: now, UpdatedAt: now, UserID: "bench",
			},
			Policy: queue.Policy{Dedupe: queue.Append},
		})
		if err != nil {
			return time.Since(start), err
		}
	}
	return time.Since(start), nil
}
