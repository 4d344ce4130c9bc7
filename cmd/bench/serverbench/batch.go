package serverbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/tabfence/tabfence/cmd/bench/figures"
	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/wire"
)

// Batched push: how many mutations the receiver takes in per second when
// each POST carries BatchSize of them (one transaction, a savepoint each),
// beside the single-request rate of the same run.
const (
	BatchSize     = 100
	BatchRequests = 500 // at most, or Duration
	batchNotes    = 100 // notes (entities) per batch: a note per mutation
)

// Targets of the receiver-alone batched rate, in mutations per second.
var batchTargets = map[string]float64{"sqlite": 20000, "postgres": 10000}

// BatchFigure is the batch scenario of one store, from Workers and from one
// worker, beside its single-request new-key scenario.
type BatchFigure struct {
	Batches []Result // Scenario names the workers
	Single  Result
}

// mutationsPerSec is a batch scenario's rate.
func mutationsPerSec(r Result) float64 { return r.RPS() * BatchSize }

// batches: every POST carries BatchSize new keys over batchNotes notes,
// every mutation applied, from workers goroutines.
func (c *client) batches(ctx context.Context, name string, workers int) (Result, error) {
	return loadN(ctx, name, strconv.Itoa(workers), workers, BatchRequests, func(worker, i int) error {
		ms := make([]wire.BatchMutation, BatchSize)
		prefix := "batch-" + strconv.Itoa(workers) + "-" + strconv.Itoa(worker) + "-" + strconv.Itoa(i) + "-"
		for j := range ms {
			id := "b" + strconv.Itoa(worker) + "-" + strconv.Itoa(j%batchNotes)
			ms[j] = wire.BatchMutation{Key: prefix + strconv.Itoa(j), Endpoint: "/api/notes", OperationID: prefix + strconv.Itoa(j),
				Operation: "put", Entity: id, Payload: []byte(`{"id":"` + id + `","text":"bench"}`)}
		}
		return c.postBatch("/api/notes/batch", ms)
	})
}

// postBatch sends one batch and requires every mutation applied.
func (c *client) postBatch(path string, ms []wire.BatchMutation) error {
	req, _ := http.NewRequestWithContext(c.ctx, "POST", c.base+path,
		bytes.NewReader(wire.AppendBatchRequest(nil, ms)))
	req.Header.Set(server.DemoUserHeader, "bench")
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("batch: status %d: %.200s", resp.StatusCode, body)
	}
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.Key
	}
	rs, err := wire.ParseBatchResponse(body, keys)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if r.Outcome != wire.BatchApplied {
			return fmt.Errorf("batch: %s %s %d", r.Key, r.Outcome, r.Status)
		}
	}
	return nil
}

// printBatches prints the batched rate of each store beside its single
// new-key rate.
func printBatches(w io.Writer, figs []BatchFigure) error {
	tw := figures.NewTable(w)
	fmt.Fprintf(tw, "store\tworkers\tbatched POSTs\tmutations/s\tp50 ms per POST\tp99 ms per POST\tsingle new key req/s\tbatched / single\t\n")
	for _, f := range figs {
		for _, b := range f.Batches {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.2f\t%.2f\t%.0f\t%.2fx\t\n", b.Store, b.Scenario, b.N, mutationsPerSec(b),
				ms(b.P50), ms(b.P99), f.Single.RPS(), mutationsPerSec(b)/f.Single.RPS())
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "(the demo's batched push: %d new keys over %d notes per POST to /api/notes/batch, at most %d POSTs or %s per row; the single-request rate is the new-key row above, %d workers)\n",
		BatchSize, batchNotes, BatchRequests, Duration, Workers)
	return nil
}
