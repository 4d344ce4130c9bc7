// Package outboxbench measures tabfence's durable outbox (tf.outbox) in
// headless Chromium beside raw-JavaScript baselines measured the same way in
// the same run, against the real server in-process on loopback.
//
// Figures: durable enqueues per second beside a raw IndexedDB put
// loop (one readwrite transaction per put, same durability); the drain of
// a queue of DrainN records (one entity, and DrainEntities) through the
// receiver's batch route beside a raw JavaScript loop POSTing the same
// records in batches of the same size to the same route, and a raw
// sequential fetch loop of single POSTs; and how long a frozen flush owner
// stalls the queue (CDP freeze -> the server counts a new effect), p50/p95.
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
	// FlushN records per run of the A/B tool's flush figures.
	FlushN = 200
	// The drain figures: DrainN queued records, in one entity and in
	// DrainEntities, DrainPer per batch request (the outbox's default
	// batch.max and the receiver's MaxBatch), DrainRounds timed rounds per
	// side (see drainVsRawJS).
	DrainN, DrainEntities, DrainPer, DrainRounds = 2000, 50, 100, 3
	FrozenRuns                                   = 10
)

// Targets of the outbox.
const (
	targetVsBatch     = 0.8 // x the raw batch loop
	targetVsSingle    = 5.0 // x the raw sequential fetch loop of single POSTs
	targetEnqueue     = 0.8 // x raw IndexedDB put loop
	frozenStallMs     = 1000
	frozenTimeoutMs   = 1500
	frozenSlackMs     = 2000
	frozenServerDelay = 10 * time.Millisecond
)

type bench struct {
	url   string
	delay atomic.Int64 // ns before every POST /api/notes
	// batches counts the outbox's POSTs to the batch route (the raw loop's,
	// under a "raw-" fencing resource, are not counted).
	batches atomic.Int64
	seq     int
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
		if r.Method == http.MethodPost && r.URL.Path == "/api/notes/batch" && !strings.HasPrefix(r.Header.Get("X-Client-Resource"), "raw-") {
			bn.batches.Add(1)
		}
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
	enq, enqModel rates
	one, many     drain // DrainN records in 1 entity, in DrainEntities
	frozen        []float64
}

// drain is one drain figure (drainVsRawJS): tabfence's rate beside the raw
// batch loop's and the raw single-POST loop's, per-round ratios to each,
// and the outbox's batch requests per drain of DrainN.
type drain struct {
	TF       float64   `json:"tf"`
	Batch    float64   `json:"batch"`
	Single   float64   `json:"single"`
	VsBatch  []float64 `json:"vsBatch"`
	VsSingle []float64 `json:"vsSingle"`
	// Model: the raw JS model of the drain's durable steps (drainModelJS).
	Model        float64   `json:"model"`
	ModelVsBatch []float64 `json:"modelVsBatch"`
	Requests     float64   `json:"-"`
}

func (d drain) vsBatch() rates  { return rates{Go: d.TF, Raw: d.Batch, Ratios: d.VsBatch} }
func (d drain) vsSingle() rates { return rates{Go: d.TF, Raw: d.Single, Ratios: d.VsSingle} }
func (d drain) model() rates    { return rates{Go: d.Model, Raw: d.Batch, Ratios: d.ModelVsBatch} }

// measure takes Run's figures, one after the other.
func (bn *bench) measure(b *harness.Browser) (r results, err error) {
	for _, c := range []struct {
		to       *rates
		name, js string
	}{
		{&r.enq, "enqueue", enqueueVsRawJS(EnqueueOps, EnqueueWarm, EnqueueRounds, false)},
		// The ceiling of an enqueue that writes the outbox's record.
		{&r.enqModel, "enqueue model", enqueueVsRawJS(EnqueueOps, EnqueueWarm, EnqueueRounds, true)},
	} {
		if *c.to, err = bn.inPage(b, c.name, c.js); err != nil {
			return r, err
		}
	}
	if r.one, err = bn.drain(b, 1); err != nil {
		return r, fmt.Errorf("drain, 1 entity: %w", err)
	}
	if r.many, err = bn.drain(b, DrainEntities); err != nil {
		return r, fmt.Errorf("drain, %d entities: %w", DrainEntities, err)
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
	r, err := harness.EvalFor[rates](tab, 5*time.Minute, js)
	if err == nil && len(r.Ratios) == 0 {
		err = errors.New("no rounds")
	}
	if err != nil {
		return r, fmt.Errorf("%s: %w", name, err)
	}
	return r, nil
}

// drain measures drainVsRawJS in a fresh demo tab whose outbox sends to the
// batch route, DrainPer records per request.
func (bn *bench) drain(b *harness.Browser, entities int) (drain, error) {
	tab, err := bn.open(b, url.Values{"batch": {"1"}, "batchMax": {strconv.Itoa(DrainPer)}})
	if err != nil {
		return drain{}, err
	}
	defer tab.Close()
	before := bn.batches.Load()
	d, err := harness.EvalFor[drain](tab, 10*time.Minute, drainVsRawJS(DrainN, entities, DrainPer, DrainRounds))
	if err == nil && len(d.VsBatch) == 0 {
		err = errors.New("no rounds")
	}
	// The untimed round drains 2 pages' worth: DrainRounds drains of
	// DrainN and that one.
	d.Requests = float64(bn.batches.Load()-before) * float64(DrainN) / float64(DrainRounds*DrainN+2*DrainPer)
	return d, err
}

func (r results) print(w io.Writer) error {
	fmt.Fprintf(w, "outbox: enqueue: %d per side (strict durability, queue paused) after %d untimed, alternating with the raw put loop in %d rounds in one page; ratio: median of the per-round ratios (pooled and per-round range beside)\n", EnqueueOps, EnqueueWarm, EnqueueRounds)
	fmt.Fprintf(w, "  drain: %d records queued (paused, untimed) in 1 and in %d entities, resume -> the last ack, through the batch route POST /api/notes/batch (%d per request; SQLite, loopback), beside in the same page a raw JS loop POSTing the same records %d per request to the same route and a raw sequential fetch loop of single POSTs to /api/notes (the same headers), after a short untimed round of each, %d rounds rotating the order; same statistics\n", DrainN, DrainEntities, DrainPer, DrainPer, DrainRounds)
	fmt.Fprintf(w, "  drain model (the ceiling of any durable per-record outbox here): the outbox's IndexedDB steps per page in raw JavaScript on a database of the outbox's schema and record shape: read the page (live index), one readwrite transaction marking each sending (get + put), the same batch POST, one readwrite transaction writing each result (get + put); a side of the same rounds, same statistics\n")
	fmt.Fprintf(w, "  model (the ceiling of the enqueue figure): the enqueue's write of the outbox's record into its database in raw JavaScript (no Go, no events, no status), same baseline, same statistics\n")
	tw := benchfigures.NewTable(w)
	fmt.Fprintln(tw, "figure\ttabfence\traw JS\tratio\ttarget\tmet\t")
	er := r.enq.Ratio()
	fmt.Fprintf(tw, "durable enqueues/s\t%.0f\t%.0f\t%.2fx (%s)\t>= %.1fx\t%s\t\n", r.enq.Go, r.enq.Raw, er, r.enq.Spread(), targetEnqueue, yes(er >= targetEnqueue))
	fmt.Fprintf(tw, "raw JS model of the enqueue's write\t%.0f\t%.0f\t%.2fx (%s)\t\t\t\n", r.enqModel.Go, r.enqModel.Raw, r.enqModel.Ratio(), r.enqModel.Spread())
	for _, d := range []struct {
		name string
		d    drain
	}{{"1 entity", r.one}, {strconv.Itoa(DrainEntities) + " entities", r.many}} {
		vb, vs := d.d.vsBatch(), d.d.vsSingle()
		fmt.Fprintf(tw, "drain %d, %s, vs raw batch loop (records/s)\t%.0f\t%.0f\t%.2fx (%s)\t>= %.1fx\t%s\t\n", DrainN, d.name, vb.Go, vb.Raw, vb.Ratio(), vb.Spread(), targetVsBatch, yes(vb.Ratio() >= targetVsBatch))
		vm := d.d.model()
		fmt.Fprintf(tw, "raw JS model of the batched drain's durable steps, %s, vs raw batch loop\t%.0f\t%.0f\t%.2fx (%s)\t\t\t\n", d.name, vm.Go, vm.Raw, vm.Ratio(), vm.Spread())
		fmt.Fprintf(tw, "drain %d, %s, vs raw single POSTs (records/s)\t%.0f\t%.0f\t%.2fx (%s)\t>= %.1fx\t%s\t\n", DrainN, d.name, vs.Go, vs.Raw, vs.Ratio(), vs.Spread(), targetVsSingle, yes(vs.Ratio() >= targetVsSingle))
		fmt.Fprintf(tw, "drain %d, %s: outbox requests per drain\t%.0f\t%d\t\t\t\t\n", DrainN, d.name, d.d.Requests, (DrainN+DrainPer-1)/DrainPer)
	}
	p50, p95 := harness.Percentile(r.frozen, 50), harness.Percentile(r.frozen, 95)
	limit := float64(frozenStallMs + frozenTimeoutMs + frozenSlackMs)
	fmt.Fprintf(tw, "frozen owner -> moving p50 (ms)\t%.0f\t\t\t\t\t\n", p50)
	fmt.Fprintf(tw, "frozen owner -> moving p95 (ms)\t%.0f\t\t\t<= %.0f\t%s\t\n", p95, limit, yes(p95 <= limit))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "frozen owner: %d runs, stall %d ms + status timeout %d ms, server delay %v per request, records one POST each; CDP freeze -> the server counts a new effect from a newer owner (a higher server fencing token)\n",
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
	// One POST per record unless the figure asks for the batch route
	// (batch=1): the middleware observes POST /api/notes.
	if q.Get("batch") == "" {
		q.Set("batch", "0")
	}
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
	if err := owner.SetFrozen(true); err != nil {
		return 0, err
	}
	defer owner.SetFrozen(false)
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
