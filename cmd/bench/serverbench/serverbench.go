// Package serverbench measures the receiver behind the real tabfence server
// handler: requests per second and p50/p99 latency for new keys, replays and
// stale-token rejections, and mutations per second in batched POSTs, on
// SQLite and on PostgreSQL, from a load generator in the same process over
// loopback TCP.
//
// Each scenario is bounded (Requests or Duration, whichever comes first) so
// a full run stays well under a minute on 2 cores.
package serverbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/receiver/pgstore"
	"github.com/tabfence/tabfence/wire"

	"github.com/tabfence/tabfence/cmd/bench/figures"
)

// Limits of one scenario.
const (
	Requests = 5000
	Duration = 5 * time.Second
	Workers  = 8
)

// Result is one measured scenario.
type Result struct {
	Store, Scenario string
	N               int
	Elapsed         time.Duration
	P50, P99        time.Duration
}

// RPS is requests per second.
func (r Result) RPS() float64 { return float64(r.N) / r.Elapsed.Seconds() }

// Run measures SQLite, and PostgreSQL when pgURL is not empty (in a schema
// of its own, dropped afterwards), and prints a table to w.
func Run(ctx context.Context, w io.Writer, pgURL string) error {
	var results []Result
	var batches []BatchFigure
	var alone []AloneFigure
	dir, err := os.MkdirTemp("", "tabfence-serverbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rs, bf, err := measure(ctx, "sqlite", filepath.Join(dir, "bench.db"))
	if err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	results, batches = append(results, rs...), append(batches, bf)
	af, err := runAlone(ctx, "sqlite", dir, "")
	if err != nil {
		return fmt.Errorf("sqlite alone: %w", err)
	}
	alone = append(alone, af)
	if pgURL != "" {
		u, drop, err := pgstore.NewSchema(ctx, pgURL, "bench")
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		rs, bf, err := measure(ctx, "postgres", u)
		_ = drop(context.Background())
		if err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		results, batches = append(results, rs...), append(batches, bf)
		af, err := runAlonePG(ctx, pgURL)
		if err != nil {
			return fmt.Errorf("postgres alone: %w", err)
		}
		alone = append(alone, af)
	}
	tw := figures.NewTable(w)
	fmt.Fprintf(tw, "store\tscenario\trequests\treq/s\tp50 ms\tp99 ms\t\n")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.2f\t%.2f\t\n", r.Store, r.Scenario, r.N, r.RPS(),
			ms(r.P50), ms(r.P99))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "(%d workers, at most %d requests or %s per scenario, loopback HTTP/1.1 keep-alive)\n", Workers, Requests, Duration)
	if err := printBatches(w, batches); err != nil {
		return err
	}
	if err := printAlone(w, alone); err != nil {
		return err
	}
	if pgURL == "" {
		fmt.Fprintln(w, "PostgreSQL not measured: no URL (run under internal/testenv/with-postgres.sh)")
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// measure runs the scenarios against a fresh server on db: new keys,
// replays, stale tokens, then batches (beside the new keys' rate).
func measure(ctx context.Context, name, db string) ([]Result, BatchFigure, error) {
	srv, err := server.New(server.Config{DB: db, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, BatchFigure{}, err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, BatchFigure{}, err
	}
	hs := &http.Server{Handler: srv}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	c := &client{ctx: ctx, base: "http://" + ln.Addr().String(), http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: Workers * 2}, Timeout: 30 * time.Second}}
	defer c.http.CloseIdleConnections()

	var results []Result
	for _, scenario := range []func(context.Context, string) (Result, error){c.newKeys, c.replays, c.staleTokens} {
		r, err := scenario(ctx, name)
		if err != nil {
			return nil, BatchFigure{}, err
		}
		results = append(results, r)
	}
	bf := BatchFigure{Single: results[0]}
	for _, workers := range []int{Workers, 1} {
		b, err := c.batches(ctx, name, workers)
		if err != nil {
			return nil, BatchFigure{}, err
		}
		bf.Batches = append(bf.Batches, b)
	}
	return results, bf, nil
}

// client sends the scenarios' requests to the server at base.
type client struct {
	ctx  context.Context
	base string
	http *http.Client
}

func (c *client) post(user, key, resource string, token uint64, id string) (int, http.Header, error) {
	req, _ := http.NewRequestWithContext(c.ctx, "POST", c.base+"/api/notes",
		strings.NewReader(`{"id":"`+id+`","text":"bench"}`))
	req.Header.Set(server.DemoUserHeader, user)
	req.Header.Set(wire.HeaderIdempotencyKey, key)
	if resource != "" {
		req.Header.Set(wire.HeaderResource, resource)
		req.Header.Set(wire.HeaderFencingToken, wire.FormatToken(token))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header, nil
}

func (c *client) issue(user, resource string) (uint64, error) {
	req, _ := http.NewRequestWithContext(c.ctx, "POST", c.base+"/fence/"+resource, nil)
	req.Header.Set(server.DemoUserHeader, user)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct{ Token uint64 }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, err
	}
	return out.Token, nil
}

// newKeys: every request runs the handler and commits.
func (c *client) newKeys(ctx context.Context, name string) (Result, error) {
	return load(ctx, name, "new key", func(worker, i int) error {
		st, _, err := c.post("bench", "new-"+strconv.Itoa(worker)+"-"+strconv.Itoa(i), "", 0, "w"+strconv.Itoa(worker))
		return expect(st, err, http.StatusCreated, http.StatusOK)
	})
}

// replays: a set of finished keys, answered from the store.
func (c *client) replays(ctx context.Context, name string) (Result, error) {
	const replayKeys = 20
	for w := 0; w < Workers; w++ {
		for j := 0; j < replayKeys; j++ {
			st, _, err := c.post("bench", "replay-"+strconv.Itoa(w)+"-"+strconv.Itoa(j), "", 0, "r"+strconv.Itoa(w))
			if err := expect(st, err, http.StatusCreated, http.StatusOK); err != nil {
				return Result{}, err
			}
		}
	}
	return load(ctx, name, "replay", func(worker, i int) error {
		st, h, err := c.post("bench", "replay-"+strconv.Itoa(worker)+"-"+strconv.Itoa(i%replayKeys), "", 0, "r"+strconv.Itoa(worker))
		if err == nil && h.Get(wire.HeaderReplayed) != "true" {
			return errors.New("not replayed")
		}
		return expect(st, err, http.StatusCreated, http.StatusOK)
	})
}

// staleTokens: a deposed leader keeps sending its old token.
func (c *client) staleTokens(ctx context.Context, name string) (Result, error) {
	t1, err := c.issue("bench", "doc:1")
	if err != nil {
		return Result{}, err
	}
	t2, err := c.issue("bench", "doc:1")
	if err != nil {
		return Result{}, err
	}
	if st, _, err := c.post("bench", "leader-2", "doc:1", t2, "doc1"); expect(st, err, 201, 200) != nil {
		return Result{}, fmt.Errorf("new leader write: %d %v", st, err)
	}
	return load(ctx, name, "stale token", func(worker, i int) error {
		st, _, err := c.post("bench", "stale-"+strconv.Itoa(worker)+"-"+strconv.Itoa(i), "doc:1", t1, "doc1")
		return expect(st, err, http.StatusConflict)
	})
}

func expect(status int, err error, ok ...int) error {
	if err != nil {
		return err
	}
	for _, s := range ok {
		if status == s {
			return nil
		}
	}
	return fmt.Errorf("unexpected status %d", status)
}

// load runs fn from Workers goroutines until Requests calls or Duration.
func load(ctx context.Context, store, scenario string, fn func(worker, i int) error) (Result, error) {
	return loadN(ctx, store, scenario, Workers, Requests, fn)
}

// loadN runs fn from workers goroutines until limit calls or Duration.
func loadN(ctx context.Context, store, scenario string, workers, limit int, fn func(worker, i int) error) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, Duration)
	defer cancel()
	var next atomic.Int64
	var mu sync.Mutex
	var lat []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			mine := make([]time.Duration, 0, limit/workers+1)
			for i := 0; ctx.Err() == nil && next.Add(1) <= int64(limit); i++ {
				t0 := time.Now()
				err := fn(w, i)
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					break
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return Result{}, fmt.Errorf("%s %s: %w", store, scenario, firstErr)
	}
	if len(lat) == 0 {
		return Result{}, fmt.Errorf("%s %s: no requests completed", store, scenario)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	return Result{Store: store, Scenario: scenario, N: len(lat), Elapsed: elapsed, P50: pct(0.50), P99: pct(0.99)}, nil
}
