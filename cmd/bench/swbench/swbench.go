// Package swbench measures Background Sync (tabfence/sw) in headless
// Chromium against the demo server in-process on loopback, every time on
// the server's side: a middleware in front of the demo server notes when
// each fencing token request and each send arrived, and when each new
// effect was answered.
//
// Figures: a sync event -> the last of N mutations answered, the mutations
// queued offline in a tab that was then closed (no tab open while the
// worker drains), the worker warm (its runtime loaded by the previous
// event) and cold (CDP ServiceWorker.stopWorker before the event), beside
// the same N flushed from an open tab (resume -> the last answer), rounds
// rotating the three so a burst of load lands on all alike; and the cold
// start alone: a stopped worker -> the first send of one queued mutation
// reaching the server, p50/p95, with the worker's fencing token request
// (Go started, the outbox opened, the lock and lease taken) on the way.
package swbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/chromedp/cdproto/serviceworker"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/e2e/harness"
)

// Sizes of the runs.
const (
	N        = 100 // mutations per flush
	Entities = 4   // N spread over this many entities (the default concurrency)
	Rounds   = 8   // flush rounds: a tab, a cold worker, a warm worker each
	ColdRuns = 24  // cold starts with one queued mutation, ColdRuns/Rounds per round
)

// flushTimeout bounds one flush of N (a sync event has about 3 minutes).
const flushTimeout = 2 * time.Minute

type bench struct {
	url  string
	arr  *arrivals
	b    *harness.Browser
	sw   *harness.ServiceWorkers
	ver  harness.SWVersion // the demo's active worker
	name string            // the queue every page and the worker share
	tag  string            // its sync tag (the queue's Web Lock name)
	page url.Values        // the demo page's parameters
}

// flush is one timed flush, in ms from the trigger (the bench's clock just
// before it): to the first fencing token request, to the first send, and
// to the last new effect answered; for a cold worker also to CDP's report
// that it runs (its script evaluated, before the runtime loads).
type flush struct {
	fence, first, last float64
	running            float64
	// extra is how many of the flush's sends were not a new effect
	// (replays, failures): 0 when each mutation was sent once.
	extra int
}

// Run measures and prints the tables to w. distDir holds the built runtime
// (make build).
func Run(ctx context.Context, w io.Writer, distDir string) error {
	bn, stop, err := start(ctx, distDir)
	if err != nil {
		return err
	}
	defer stop()
	if err := bn.install(ctx); err != nil {
		return fmt.Errorf("installing the demo's worker: %w", err)
	}
	res, err := bn.measure(ctx)
	if err != nil {
		return err
	}
	return res.print(w)
}

// start serves distDir with the demo server (a fresh SQLite database, the
// arrivals middleware in front) and starts a browser whose Service Workers
// it follows; stop undoes it.
func start(ctx context.Context, distDir string) (bn *bench, stop func(), err error) {
	if err := harness.CheckDist(distDir); err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "tabfence-swbench-")
	if err != nil {
		return nil, nil, err
	}
	bn = &bench{arr: &arrivals{}}
	srv, err := server.New(server.Config{
		DB: filepath.Join(dir, "bench.db"), Dist: distDir,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Middleware: bn.arr.middleware,
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	ts := httptest.NewServer(srv)
	bn.url = ts.URL
	undo := func() {
		ts.Close()
		srv.Close()
		os.RemoveAll(dir)
	}
	if bn.b, err = harness.Start(ctx, harness.Options{Bare: true}); err != nil {
		undo()
		return nil, nil, err
	}
	if bn.sw, err = bn.b.ServiceWorkers(); err != nil {
		bn.b.Close()
		undo()
		return nil, nil, err
	}
	return bn, func() {
		bn.b.Close()
		undo()
	}, nil
}

// install opens the demo with its worker, waits for the worker to be
// active, and runs one flush of each kind untimed: the first cold start
// fetches the runtime from the network into the worker's cache, which
// every later one reads.
func (bn *bench) install(ctx context.Context) error {
	bn.name = "swbench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	// batch=0: one POST /api/notes per record, which the arrivals observe.
	bn.page = url.Values{"outbox": {bn.name}, "scope": {bn.name}, "user": {"bench"}, "list": {"0"}, "sw": {"1"}, "batch": {"0"}}
	tab, err := bn.open(ctx)
	if err != nil {
		return err
	}
	defer tab.Close()
	if bn.tag, err = harness.Eval[string](tab, `tabfenceNotes.outbox.lockName`); err != nil {
		return err
	}
	if bn.ver, err = bn.sw.WaitActive(ctx, bn.scope(), func(s string) bool { return strings.HasPrefix(s, bn.url+"/sw.js") }); err != nil {
		return err
	}
	tab.Close()
	if _, err := bn.fromWorker(ctx, N, true); err != nil {
		return fmt.Errorf("untimed cold sync: %w", err)
	}
	if _, err := bn.fromTab(ctx, N); err != nil {
		return fmt.Errorf("untimed tab flush: %w", err)
	}
	return nil
}

// results are Run's figures: per round, the three flushes of N; the cold
// starts of one mutation.
type results struct {
	tab, cold, warm []flush
	starts          []flush
	extra           int // sends of the whole part that were not a new effect, untimed flushes included
}

// measure runs the rounds: a tab's flush and a cold then a warm worker's
// sync event (the warm one is the same worker lifetime), the tab first in
// even rounds and last in odd ones, then ColdRuns/Rounds cold starts.
func (bn *bench) measure(ctx context.Context) (r results, err error) {
	for round := 0; round < Rounds; round++ {
		steps := []string{"tab", "cold", "warm"}
		if round%2 == 1 {
			steps = []string{"cold", "warm", "tab"}
		}
		for _, s := range steps {
			var f flush
			switch s {
			case "tab":
				f, err = bn.fromTab(ctx, N)
				r.tab = append(r.tab, f)
			case "cold":
				f, err = bn.fromWorker(ctx, N, true)
				r.cold = append(r.cold, f)
			case "warm":
				f, err = bn.fromWorker(ctx, N, false)
				r.warm = append(r.warm, f)
			}
			if err != nil {
				return r, fmt.Errorf("round %d, %s: %w", round, s, err)
			}
		}
		for i := 0; i < ColdRuns/Rounds; i++ {
			f, err := bn.fromWorker(ctx, 1, true)
			if err != nil {
				return r, fmt.Errorf("round %d, cold start: %w", round, err)
			}
			r.starts = append(r.starts, f)
		}
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
	}
	r.extra = bn.arr.extraSends()
	return r, nil
}

// fromTab times an open tab's flush of n mutations enqueued while the
// queue was paused: resume -> the n-th new effect answered.
func (bn *bench) fromTab(ctx context.Context, n int) (flush, error) {
	tab, err := bn.open(ctx)
	if err != nil {
		return flush{}, err
	}
	defer tab.Close()
	if err := bn.idle(ctx, tab); err != nil {
		return flush{}, err
	}
	if _, err := harness.Eval[bool](tab, `tabfenceNotes.outbox.pause().then(() => true)`); err != nil {
		return flush{}, err
	}
	if err := bn.enqueue(ctx, tab, n); err != nil {
		return flush{}, err
	}
	bn.arr.reset()
	t0 := time.Now()
	if _, err := harness.Eval[bool](tab, `tabfenceNotes.outbox.resume().then(() => true)`); err != nil {
		return flush{}, err
	}
	f, err := bn.timed(ctx, t0, n)
	if err != nil {
		return f, err
	}
	if err := bn.idle(ctx, tab); err != nil {
		return f, err
	}
	f.extra = bn.arr.extraSince()
	return f, nil
}

// fromWorker times the demo's worker: n mutations are enqueued in a tab
// that is offline (CDP network emulation; the worker is not) and then
// closed, the worker stopped when cold, and a sync event with the queue's
// tag dispatched (CDP): the event -> the n-th new effect answered.
func (bn *bench) fromWorker(ctx context.Context, n int, cold bool) (flush, error) {
	if err := bn.fillOffline(ctx, n); err != nil {
		return flush{}, err
	}
	if cold {
		if err := bn.sw.Stop(ctx, bn.ver); err != nil {
			return flush{}, err
		}
	} else if v, ok := harness.Active(bn.sw.Versions(bn.scope())); !ok || v.Running != serviceworker.VersionRunningStatusRunning {
		return flush{}, errors.New("the worker stopped before its warm event")
	}
	bn.arr.reset()
	running := make(chan time.Time, 1)
	if cold {
		go bn.whenRunning(ctx, running)
	}
	t0 := time.Now()
	if err := bn.sw.DispatchSync(ctx, bn.scope(), bn.tag, false); err != nil {
		return flush{}, err
	}
	f, err := bn.timed(ctx, t0, n)
	if err != nil {
		return f, err
	}
	if cold {
		select {
		case at := <-running:
			f.running = float64(at.Sub(t0).Microseconds()) / 1000
		case <-time.After(flushTimeout):
			return f, errors.New("CDP never reported the worker running")
		}
	}
	if err := bn.reported(ctx, t0, n); err != nil {
		return f, err
	}
	f.extra = bn.arr.extraSince()
	return f, nil
}

// whenRunning sends the time CDP reports the stopped worker running again
// (the harness wakes on every version update).
func (bn *bench) whenRunning(ctx context.Context, at chan<- time.Time) {
	_, err := bn.sw.Wait(ctx, "the worker running", bn.scope(), flushTimeout, func(vs []harness.SWVersion) bool {
		v, ok := harness.Active(vs)
		return ok && v.Running == serviceworker.VersionRunningStatusRunning
	})
	if err == nil {
		at <- time.Now()
	}
}

func (bn *bench) scope() string { return bn.url + "/" }

// reported waits for the worker's report of the event dispatched at t0
// (self.__tabfenceSync) and checks the drain ended "done", n acked.
func (bn *bench) reported(ctx context.Context, t0 time.Time, n int) error {
	w, err := bn.sw.Attach(ctx, bn.scope())
	if err != nil {
		return err
	}
	defer w.Close()
	since := float64(t0.UnixMilli())
	var got harness.SyncReport
	err = harness.Poll(ctx, "the worker's report", 30*time.Second, 10*time.Millisecond, func() (bool, error) {
		rs, err := w.SyncReports()
		if err != nil || len(rs) == 0 || rs[len(rs)-1].At < since {
			return false, err
		}
		got = rs[len(rs)-1]
		return true, nil
	})
	if err != nil {
		return err
	}
	if got.Reason != "done" || got.Acked != n || got.Tag != bn.tag {
		return fmt.Errorf("the worker's drain: %+v, want done with %d acked", got, n)
	}
	return nil
}

// timed waits for n new effects since t0 and reads the arrivals' times.
func (bn *bench) timed(ctx context.Context, t0 time.Time, n int) (flush, error) {
	if err := bn.arr.waitEffects(ctx, strconv.Itoa(n)+" mutations answered", n, flushTimeout); err != nil {
		return flush{}, err
	}
	a := bn.arr.snapshot()
	if len(a.fences) == 0 || len(a.sends) == 0 {
		return flush{}, errors.New("effects without a fencing token request or a send")
	}
	ms := func(t time.Time) float64 { return float64(t.Sub(t0).Microseconds()) / 1000 }
	return flush{fence: ms(a.fences[0]), first: ms(a.sends[0]), last: ms(a.effects[n-1])}, nil
}

// print writes the tables.
func (r results) print(w io.Writer) error {
	fmt.Fprintf(w, "sw: %d mutations in %d entities per flush, %d rounds (a tab's flush, a cold worker's and a warm worker's sync event, rotating); every time is the server's (a middleware in front of the demo server) from the bench's clock just before the trigger\n", N, Entities, Rounds)
	fmt.Fprintf(w, "  tab: the queue paused, %d enqueued, resume -> the last answer; worker: %d enqueued in a tab offline (CDP), the tab closed, CDP dispatchSyncEvent -> the last answer; cold: CDP stopWorker first; warm: the worker that just drained the cold round\n", N, N)
	return printTables(w, r)
}

var errNoRounds = errors.New("swbench: no rounds")
