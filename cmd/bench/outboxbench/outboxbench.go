// Package outboxbench measures tabfence's durable outbox (tf.outbox) in
// headless Chromium beside raw-JavaScript baselines measured the same way in
// the same run, against the real server in-process on loopback.
//
// Figures: durable enqueues per second beside a raw IndexedDB put
// loop (one readwrite transaction per put, same durability); flush
// throughput for one ordered entity beside a raw sequential fetch loop to
// the same receiver, and for eight independent entities beside its ceiling,
// eight raw sequential fetch loops at once; and how long a
// frozen flush owner stalls the queue (CDP freeze -> the server counts a new
// effect), p50/p95.
package outboxbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/e2e/harness"
	"github.com/tabfence/tabfence/outbox/queue"

	benchfigures "github.com/tabfence/tabfence/cmd/bench/figures"
)

// Sizes of the runs.
const (
	EnqueueN = 300 // per run of the A/B tool (enqueuebench)
	// The enqueue figure: EnqueueOps per side after EnqueueWarm untimed,
	// tabfence and the raw put loop alternating in EnqueueRounds rounds in
	// one page (see enqueueVsRawJS).
	EnqueueOps, EnqueueWarm, EnqueueRounds = 600, 150, 60
	// The flush figures: FlushN records per round, FlushRounds rounds per
	// side (see flushVsRawJS).
	FlushRounds = 6
	FlushN      = 200
	// BacklogN records in BacklogEntities entities: a long offline queue
	// drains at the rate of a short one (claims and status reads do not
	// grow with the queue).
	BacklogN, BacklogEntities = 2000, 50
	// The flush figures with a receiver FarDelay away (the server holds
	// each POST that long): FarN records per round.
	FarDelay   = 10 * time.Millisecond
	FarN       = 80
	FrozenRuns = 10
)

// Targets of the outbox.
const (
	targetEnqueue     = 0.8 // x raw IndexedDB put loop
	targetFlushOne    = 0.9 // x raw sequential fetch loop
	targetFlushEight  = 3.0 // x tabfence's single-entity rate
	frozenStallMs     = 1000
	frozenTimeoutMs   = 1500
	frozenSlackMs     = 2000
	frozenServerDelay = 10 * time.Millisecond
)

type bench struct {
	url   string
	delay atomic.Int64 // ns before every POST /api/notes
	seq   int
	// newest is, per fencing resource, the highest server fencing token
	// whose send made a new effect (a 2xx answer that is not a replay).
	mu     sync.Mutex
	newest map[string]uint64
}

func (bn *bench) newestOf(resource string) uint64 {
	bn.mu.Lock()
	defer bn.mu.Unlock()
	return bn.newest[resource]
}

func (bn *bench) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/notes" {
			next.ServeHTTP(w, r)
			return
		}
		if d := bn.delay.Load(); d > 0 {
			time.Sleep(time.Duration(d))
		}
		tok, _ := strconv.ParseUint(r.Header.Get("X-Client-Fencing-Token"), 10, 64)
		next.ServeHTTP(&effectWriter{ResponseWriter: w, res: r.Header.Get("X-Client-Resource"), tok: tok, bn: bn}, r)
	})
}

// effectWriter notes the fencing token of an answer that is a new effect.
type effectWriter struct {
	http.ResponseWriter
	res string
	tok uint64
	bn  *bench
}

func (e *effectWriter) WriteHeader(code int) {
	if code/100 == 2 && e.Header().Get("Idempotent-Replayed") == "" {
		e.bn.mu.Lock()
		if e.bn.newest == nil {
			e.bn.newest = map[string]uint64{}
		}
		if e.tok > e.bn.newest[e.res] {
			e.bn.newest[e.res] = e.tok
		}
		e.bn.mu.Unlock()
	}
	e.ResponseWriter.WriteHeader(code)
}

// Run measures and prints a table to w. distDir holds the built runtime
// (make build).
func Run(ctx context.Context, w io.Writer, distDir string) error {
	bn, b, stop, err := start(ctx, distDir)
	if err != nil {
		return err
	}
	defer stop()
	res, err := bn.measure(b)
	if err != nil {
		return err
	}
	return res.print(w)
}

// results are Run's figures.
type results struct {
	enq, enqModel, one, eight, model rates
	oneFar, eightFar                 rates // with the receiver FarDelay away
	backlog                          float64
	frozen                           []float64
}

// measure takes Run's figures, one after the other.
func (bn *bench) measure(b *harness.Browser) (r results, err error) {
	for _, c := range []struct {
		to       *rates
		name, js string
	}{
		{&r.enq, "enqueue", enqueueVsRawJS(EnqueueOps, EnqueueWarm, EnqueueRounds, false)},
		// The ceiling of an enqueue that writes the outbox's record.
		{&r.enqModel, "enqueue model", enqueueVsRawJS(EnqueueOps, EnqueueWarm, EnqueueRounds, true)},
		{&r.one, "flush one entity", flushVsRawJS(FlushN, FlushRounds, 1, false)},
		{&r.eight, "flush eight entities", flushVsRawJS(FlushN, FlushRounds, 8, false)},
		// The ceiling of a flush that makes the outbox's durable steps: the
		// same steps in raw JavaScript (flushModelJS).
		{&r.model, "flush model", flushVsRawJS(FlushN, FlushRounds, 1, true)},
	} {
		if *c.to, err = bn.inPage(b, c.name, c.js); err != nil {
			return r, err
		}
	}
	if r.oneFar, r.eightFar, err = bn.farFlush(b); err != nil {
		return r, err
	}
	if r.backlog, err = bn.backlog(b); err != nil {
		return r, fmt.Errorf("backlog: %w", err)
	}
	if r.frozen, err = bn.frozen(b); err != nil {
		return r, fmt.Errorf("frozen owner: %w", err)
	}
	return r, nil
}

// inPage evaluates one comparison in a fresh demo tab (fresh queue).
func (bn *bench) inPage(b *harness.Browser, name, js string) (rates, error) {
	tab, err := bn.open(b, url.Values{})
	if err != nil {
		return rates{}, err
	}
	defer tab.Close()
	ctx, cancel := context.WithTimeout(tab.Ctx(), 5*time.Minute)
	defer cancel()
	r, err := chromedp.Run(ctx, chromedp.Evaluate[rates](js, chromedp.EvalAwaitPromise))
	if err == nil && len(r.Ratios) == 0 {
		err = errors.New("no rounds")
	}
	if err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	return r, nil
}

// farFlush is the flush figures again with a receiver FarDelay away: every
// POST waits that long in the server, as on a network rather than loopback.
func (bn *bench) farFlush(b *harness.Browser) (one, eight rates, err error) {
	bn.delay.Store(int64(FarDelay))
	defer bn.delay.Store(0)
	if one, err = bn.inPage(b, "flush one entity, far receiver", flushVsRawJS(FarN, FlushRounds, 1, false)); err != nil {
		return one, eight, err
	}
	eight, err = bn.inPage(b, "flush eight entities, far receiver", flushVsRawJS(FarN, FlushRounds, 8, false))
	return one, eight, err
}

// backlog is the rate at which a long queue drains (backlogJS).
func (bn *bench) backlog(b *harness.Browser) (float64, error) {
	tab, err := bn.open(b, url.Values{})
	if err != nil {
		return 0, err
	}
	defer tab.Close()
	// Minutes, not EvalTimeout: 2000 enqueues and their flush.
	ctx, cancel := context.WithTimeout(tab.Ctx(), 5*time.Minute)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[float64](backlogJS(BacklogN, BacklogEntities), chromedp.EvalAwaitPromise))
}

func (r results) print(w io.Writer) error {
	fmt.Fprintf(w, "outbox: enqueue: %d per side (strict durability, queue paused) after %d untimed, alternating with the raw put loop in %d rounds in one page; ratio: median of the per-round ratios (pooled and per-round range beside)\n", EnqueueOps, EnqueueWarm, EnqueueRounds)
	fmt.Fprintf(w, "  flush: %d records per round to POST /api/notes (SQLite, loopback) against as many raw fetches (the same headers), after one untimed round of each, alternating in %d rounds in one page; same statistics\n", FlushN, FlushRounds)
	fmt.Fprintf(w, "  models (the ceilings of the figures above them): the enqueue's write of the outbox's record into its database, and the flush's IndexedDB and fetch steps, in raw JavaScript (no Go, no events, no status), against the same baselines, same statistics; far: the flush figures with the server holding each POST %v (%d records per round)\n", FarDelay, FarN)
	tw := benchfigures.NewTable(w)
	fmt.Fprintln(tw, "figure\ttabfence\traw JS\tratio\ttarget\tmet\t")
	ratioOf := func(x rates) (float64, string) {
		return x.Ratio(), fmt.Sprintf("%.2fx (%s)", x.Ratio(), x.Spread())
	}
	er, es := ratioOf(r.enq)
	fmt.Fprintf(tw, "durable enqueues/s\t%.0f\t%.0f\t%s\t>= %.1fx\t%s\t\n", r.enq.Go, r.enq.Raw, es, targetEnqueue, yes(er >= targetEnqueue))
	fmt.Fprintf(tw, "raw JS model of the enqueue's write\t%.0f\t%.0f\t%.2fx (%s)\t\t\t\n", r.enqModel.Go, r.enqModel.Raw, r.enqModel.Ratio(), r.enqModel.Spread())
	fr, fs := ratioOf(r.one)
	fmt.Fprintf(tw, "flush 1 entity (records/s)\t%.0f\t%.0f\t%s\t>= %.1fx\t%s\t\n", r.one.Go, r.one.Raw, fs, targetFlushOne, yes(fr >= targetFlushOne))
	fmt.Fprintf(tw, "flush 8 entities (records/s)\t%.0f\t\t%.2fx of 1\t>= %.1fx\t%s\t\n", r.eight.Go, r.eight.Go/r.one.Go, targetFlushEight, yes(r.eight.Go/r.one.Go >= targetFlushEight))
	// The ceiling of the eight-entity figure: eight raw sequential fetch
	// loops at once to the same receiver (Chromium, loopback, this machine).
	fmt.Fprintf(tw, "raw fetch, 8 parallel loops (records/s)\t\t%.0f\t%.2fx of 1 loop\t\t\t\n", r.eight.Raw, r.eight.Raw/r.one.Raw)
	fmt.Fprintf(tw, "raw JS model of the flush's steps, 1 entity\t%.0f\t%.0f\t%.2fx (%s)\t\t\t\n", r.model.Go, r.model.Raw, r.model.Ratio(), r.model.Spread())
	fmt.Fprintf(tw, "flush 1 entity, receiver %v away\t%.0f\t%.0f\t%.2fx (%s)\t\t\t\n", FarDelay, r.oneFar.Go, r.oneFar.Raw, r.oneFar.Ratio(), r.oneFar.Spread())
	fmt.Fprintf(tw, "flush 8 entities, receiver %v away\t%.0f\t%.0f\t%.2fx of 1 (raw 8 loops %.2fx of 1)\t\t\t\n", FarDelay, r.eightFar.Go, r.eightFar.Raw, r.eightFar.Go/r.oneFar.Go, r.eightFar.Raw/r.oneFar.Raw)
	fmt.Fprintf(tw, "flush backlog of %d, %d entities (records/s)\t%.0f\t\t%.2fx of 8 entities\t\t\t\n", BacklogN, BacklogEntities, r.backlog, r.backlog/r.eight.Go)
	p50, p95 := harness.Percentile(r.frozen, 50), harness.Percentile(r.frozen, 95)
	limit := float64(frozenStallMs + frozenTimeoutMs + frozenSlackMs)
	fmt.Fprintf(tw, "frozen owner -> moving p50 (ms)\t%.0f\t\t\t\t\t\n", p50)
	fmt.Fprintf(tw, "frozen owner -> moving p95 (ms)\t%.0f\t\t\t<= %.0f\t%s\t\n", p95, limit, yes(p95 <= limit))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "frozen owner: %d runs, stall %d ms + status timeout %d ms, server delay %v per request; CDP freeze -> the server counts a new effect from a newer owner (a higher server fencing token)\n",
		len(r.frozen), frozenStallMs, frozenTimeoutMs, frozenServerDelay)
	return nil
}

// start checks distDir and serves it with the demo server (a fresh SQLite
// database in a temporary directory, bn's middleware in front) and starts a
// browser; stop undoes both.
func start(ctx context.Context, distDir string) (bn *bench, b *harness.Browser, stop func(), err error) {
	if err := harness.CheckDist(distDir); err != nil {
		return nil, nil, nil, err
	}
	dir, err := os.MkdirTemp("", "tabfence-outboxbench-")
	if err != nil {
		return nil, nil, nil, err
	}
	bn = &bench{}
	srv, err := server.New(server.Config{
		DB: filepath.Join(dir, "bench.db"), Dist: distDir,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Middleware: bn.middleware,
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	ts := httptest.NewServer(srv)
	bn.url = ts.URL
	if b, err = harness.Start(ctx, harness.Options{Bare: true}); err != nil {
		ts.Close()
		srv.Close()
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	return bn, b, func() {
		b.Close()
		ts.Close()
		srv.Close()
		os.RemoveAll(dir)
	}, nil
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

// open opens the demo page with a fresh queue and waits for its outbox.
func (bn *bench) open(b *harness.Browser, q url.Values) (*harness.Tab, error) {
	bn.seq++
	name := "bench-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.Itoa(bn.seq)
	if q.Get("outbox") == "" {
		q.Set("outbox", name)
		q.Set("scope", name)
	}
	q.Set("user", "bench")
	// The demo's notes list refetches and redraws every note of the user
	// after each burst of acks: thousands by the later figures, on the
	// main thread the flush and the raw loops share.
	q.Set("list", "0")
	tab, err := b.Open(bn.url + "/?" + q.Encode())
	if err != nil {
		return nil, err
	}
	err = harness.Poll(context.Background(), "outbox ready", 20*time.Second, 20*time.Millisecond, func() (bool, error) {
		return harness.Eval[bool](tab, `!!(window.tabfenceNotes && window.tabfenceNotes.ready)`)
	})
	if err != nil {
		tab.Close()
		return nil, err
	}
	return tab, nil
}

func (bn *bench) effects() (int, error) {
	resp, err := http.Get(bn.url + "/api/effects")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var v struct{ Effects int }
	err = json.NewDecoder(resp.Body).Decode(&v)
	return v.Effects, err
}

// frozen measures CDP freeze of the flushing tab -> the server counts an
// effect again (another tab stole the lock and flushes).
func (bn *bench) frozen(b *harness.Browser) ([]float64, error) {
	var out []float64
	bn.delay.Store(int64(frozenServerDelay))
	defer bn.delay.Store(0)
	for run := 0; run < FrozenRuns; run++ {
		name := "frozen-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		q := url.Values{"outbox": {name}, "scope": {name}, "stallAfter": {strconv.Itoa(frozenStallMs)}, "statusTimeout": {strconv.Itoa(frozenTimeoutMs)}}
		a, err := bn.open(b, q)
		if err != nil {
			return nil, err
		}
		c, err := bn.open(b, url.Values{"outbox": {name}, "scope": {name}, "stallAfter": {strconv.Itoa(frozenStallMs)}, "statusTimeout": {strconv.Itoa(frozenTimeoutMs)}})
		if err != nil {
			a.Close()
			return nil, err
		}
		ms, err := bn.frozenOnce(a, c)
		a.Close()
		c.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, ms)
	}
	return out, nil
}

func (bn *bench) frozenOnce(a, c *harness.Tab) (float64, error) {
	const n = 150
	if _, err := harness.Eval[any](a, `(async () => { const ob = tabfenceNotes.outbox; await ob.pause();
		const run = Math.random().toString(36).slice(2);
		for (let i = 0; i < `+strconv.Itoa(n)+`; i++) await ob.enqueue({operationType: "put-note", entityType: "note", entityId: "f" + (i % 4), payload: {id: run + "-" + i, text: "x"}});
		await ob.resume(); return true; })()`); err != nil {
		return 0, err
	}
	start, err := bn.effects()
	if err != nil {
		return 0, err
	}
	if err := harness.Poll(context.Background(), "flushing", 20*time.Second, 5*time.Millisecond, func() (bool, error) {
		n, err := bn.effects()
		return n >= start+15, err
	}); err != nil {
		return 0, err
	}
	var owner *harness.Tab
	for _, t := range []*harness.Tab{a, c} {
		if ok, _ := harness.Eval[bool](t, `tabfenceNotes.outbox.status().then(s => s.leader)`); ok {
			owner = t
		}
	}
	if owner == nil {
		return 0, fmt.Errorf("no flushing tab")
	}
	ft, err := harness.Eval[float64](owner, `tabfenceNotes.outbox.status().then(s => s.fenceToken)`)
	if err != nil {
		return 0, err
	}
	if ft <= 0 {
		return 0, fmt.Errorf("the flushing tab has no server fencing token")
	}
	frozenTok := uint64(ft)
	name, err := harness.Eval[string](owner, `tabfenceNotes.name`)
	if err != nil {
		return 0, err
	}
	resource := queue.FenceResource(name, 1, "bench")
	// Freeze an owner whose progress the other tab has seen: an ack it
	// wrote. Before the first one, the other tab times the stall from the
	// oldest record's enqueue, and how soon that is depends on when the
	// flush writes its first acks (ChargeAhead), not on the takeover.
	other := c
	if owner == c {
		other = a
	}
	if err := harness.Poll(context.Background(), "an ack the other tab sees", 20*time.Second, 5*time.Millisecond, func() (bool, error) {
		return harness.Eval[bool](other, `tabfenceNotes.outbox.status().then(s => s.acked > 0)`)
	}); err != nil {
		return 0, err
	}
	t0 := time.Now()
	if _, err := chromedp.Call(owner.Ctx(), page.SetWebLifecycleState, page.SetWebLifecycleStateParams{State: page.SetWebLifecycleStateStateFrozen}); err != nil {
		return 0, err
	}
	defer chromedp.Call(owner.Ctx(), page.SetWebLifecycleState, page.SetWebLifecycleStateParams{State: page.SetWebLifecycleStateStateActive})
	time.Sleep(2 * frozenServerDelay) // the request on the wire lands
	base, err := bn.effects()
	if err != nil {
		return 0, err
	}
	if base >= start+n {
		return 0, fmt.Errorf("finished before the freeze")
	}
	// Moving again: a new effect from a newer owner (a higher server
	// fencing token); requests the frozen tab sent before the freeze may
	// still land and do not count.
	err = harness.Poll(context.Background(), "queue moving again", 20*time.Second, 5*time.Millisecond, func() (bool, error) {
		return bn.newestOf(resource) > frozenTok, nil
	})
	if err != nil {
		return 0, err
	}
	return float64(time.Since(t0).Microseconds()) / 1000, nil
}
