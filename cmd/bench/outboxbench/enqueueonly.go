package outboxbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/profiler"
	"github.com/chromedp/chromedp"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/e2e/harness"
)

// profile starts Chromium's CPU profiler in tab, sampling every interval µs;
// the returned func stops it and writes the profile to path ("" drops it).
func profile(tab *harness.Tab, interval int) func(path string) {
	ctx, err := tab.CDP()
	if err != nil {
		return func(string) {}
	}
	chromedp.Call(ctx, profiler.Enable, cdp.Empty{})
	chromedp.Call(ctx, profiler.SetSamplingInterval, profiler.SetSamplingIntervalParams{Interval: int64(interval)})
	chromedp.Call(ctx, profiler.Start, cdp.Empty{})
	return func(path string) {
		res, err := chromedp.Call(ctx, profiler.Stop, cdp.Empty{})
		if err != nil || path == "" {
			return
		}
		bs, _ := json.Marshal(res.Profile)
		os.WriteFile(path, bs, 0o644)
	}
}

// RunEnqueue is the enqueue figure of Run alone (same page, same JS, same
// record shape), for quick iteration: rounds interleaved rounds, each
// printed. profileDir, when set, receives a Chromium CPU profile of the
// first enqueue round (enqueue.cpuprofile).
func RunEnqueue(ctx context.Context, w io.Writer, distDir string, rounds int, profileDir, probe string) error {
	bn, b, stop, err := start(ctx, distDir)
	if err != nil {
		return err
	}
	defer stop()
	var bestE, bestR float64
	for round := 0; round < rounds; round++ {
		var e, r float64
		for i, js := range []string{enqueueJS(EnqueueN), rawPutJS(EnqueueN)} {
			tab, err := bn.open(b, url.Values{})
			if err != nil {
				return err
			}
			var stopProf func(string)
			if i == 0 && round == 0 && profileDir != "" {
				stopProf = profile(tab, 250)
			}
			if probe != "" && i == 0 {
				if _, err := harness.Eval[any](tab, probe); err != nil {
					return err
				}
			}
			v, err := harness.Eval[float64](tab, js)
			if probe != "" && i == 0 {
				if s, err := harness.Eval[string](tab, `JSON.stringify(window.__probe)`); err == nil {
					fmt.Fprintln(w, "probe:", s)
				}
			}
			if stopProf != nil {
				stopProf(filepath.Join(profileDir, "enqueue.cpuprofile"))
			}
			tab.Close()
			if err != nil {
				return err
			}
			if i == 0 {
				e = v
			} else {
				r = v
			}
		}
		bestE, bestR = max(bestE, e), max(bestR, r)
		fmt.Fprintf(w, "round %d: enqueue %.0f/s raw put %.0f/s ratio %.2fx\n", round, e, r, e/r)
	}
	fmt.Fprintf(w, "best: enqueue %.0f/s raw put %.0f/s ratio %.2fx\n", bestE, bestR, bestE/bestR)
	return nil
}

// EvalInPage opens the demo page (fresh queue) and prints what js (an
// expression, awaited) returns as a string: for ad-hoc experiments. With
// profileDir, the page's CPU profile goes to profileDir/eval.cpuprofile.
// delay is held before every POST /api/notes (a receiver that far away).
func EvalInPage(ctx context.Context, w io.Writer, distDir, js, profileDir string, delay time.Duration, page url.Values) error {
	tab, stop, err := startTab(ctx, distDir, delay, page)
	if err != nil {
		return err
	}
	defer stop()
	if profileDir != "" {
		stopProf := profile(tab, 250)
		defer stopProf(filepath.Join(profileDir, "eval.cpuprofile"))
	}
	if _, err := harness.Eval[bool](tab, `(window.__eval = undefined, Promise.resolve(`+js+`).then(v => window.__eval = {v: String(v)}, e => window.__eval = {v: "error: " + e}), true)`); err != nil {
		return err
	}
	var s string
	err = harness.Poll(ctx, "eval", 10*time.Minute, 100*time.Millisecond, func() (bool, error) {
		v, err := harness.Eval[*struct{ V string }](tab, `window.__eval`)
		if v != nil {
			s = v.V
		}
		return v != nil, err
	})
	fmt.Fprintln(w, s)
	return err
}

// RunEnqueueAB compares two builds under the same load: each round runs the
// enqueue figure's JavaScript in a fresh tab of a server on distA, one on
// distB, and the raw put loop, in alternating order; it prints every round
// and the medians. Same page, record shape, durability and await per call as
// make bench.
func RunEnqueueAB(ctx context.Context, w io.Writer, distA, distB string, rounds int, profileDir string) error {
	return RunAB(ctx, w, "enqueue", distA, distB, rounds, profileDir)
}

// Figures RunAB can compare: tabfence's JavaScript and the raw baseline's.
var figures = map[string][2]string{
	"enqueue": {enqueueJS(EnqueueN), rawPutJS(EnqueueN)},
	"flush":   {flushJS(FlushN, 1), rawFetchJS(FlushN)},
	"flush8":  {flushJS(FlushN, 8), rawFetchStreamsJS(FlushN, 8)},
}

// RunAB is RunEnqueueAB for any figure of Run: "enqueue", "flush" (one
// entity, beside the raw sequential fetch loop) or "flush8" (eight
// entities, beside eight raw fetch loops).
func RunAB(ctx context.Context, w io.Writer, figure, distA, distB string, rounds int, profileDir string) error {
	js, ok := figures[figure]
	if !ok {
		return fmt.Errorf("unknown figure %q", figure)
	}
	var benches [2]*bench
	for i, d := range []string{distA, distB} {
		if err := harness.CheckDist(d); err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "tabfence-enqab-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		srv, err := server.New(server.Config{DB: filepath.Join(dir, "bench.db"), Dist: d,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			return err
		}
		defer srv.Close()
		ts := httptest.NewServer(srv)
		defer ts.Close()
		benches[i] = &bench{url: ts.URL}
	}
	b, err := harness.Start(ctx, harness.Options{Bare: true})
	if err != nil {
		return err
	}
	defer b.Close()
	run := func(bn *bench, js, prof string) (float64, error) {
		tab, err := bn.open(b, url.Values{})
		if err != nil {
			return 0, err
		}
		defer tab.Close()
		if prof != "" {
			defer profile(tab, 250)(filepath.Join(profileDir, prof+".cpuprofile"))
		}
		return harness.Eval[float64](tab, js)
	}
	var as, bs, rs, ra, rb []float64
	for round := 0; round < rounds; round++ {
		order := []int{0, 1}
		if round%2 == 1 {
			order = []int{1, 0}
		}
		var v [2]float64
		for _, i := range order {
			prof := ""
			if profileDir != "" {
				prof = fmt.Sprintf("%c%d", 'A'+i, round)
			}
			x, err := run(benches[i], js[0], prof)
			if err != nil {
				return err
			}
			v[i] = x
		}
		r, err := run(benches[0], js[1], "")
		if err != nil {
			return err
		}
		as, bs, rs = append(as, v[0]), append(bs, v[1]), append(rs, r)
		ra, rb = append(ra, v[0]/r), append(rb, v[1]/r)
		fmt.Fprintf(w, "round %d: A %.0f/s  B %.0f/s  raw %.0f/s  A/raw %.2fx  B/raw %.2fx  B/A %.2fx\n", round, v[0], v[1], r, v[0]/r, v[1]/r, v[1]/v[0])
	}
	fmt.Fprintf(w, "median: A %.0f/s  B %.0f/s  raw %.0f/s  A/raw %.2fx  B/raw %.2fx\n",
		harness.Percentile(as, 50), harness.Percentile(bs, 50), harness.Percentile(rs, 50), harness.Percentile(ra, 50), harness.Percentile(rb, 50))
	return nil
}

// RunFlushProfile enqueues FlushN records in entities entities (paused), then
// profiles only the flush (resume to the last ack) with Chromium's CPU
// profiler: profileDir/flush.cpuprofile. entities <= 0 profiles the raw
// sequential fetch loop instead (profileDir/raw.cpuprofile). It prints the
// rate.
func RunFlushProfile(ctx context.Context, w io.Writer, distDir string, entities int, profileDir string) error {
	tab, stop, err := startTab(ctx, distDir, 0, nil)
	if err != nil {
		return err
	}
	defer stop()
	name, js := "raw", rawFetchJS(FlushN)
	if entities > 0 {
		if _, err := harness.Eval[bool](tab, `(async () => {`+fillJS(FlushN, entities, 1)+`return true; })()`); err != nil {
			return err
		}
		name, js = "flush", `(async () => {`+drainJS(FlushN)+`})()`
	}
	stopProf := profile(tab, 100)
	v, err := harness.Eval[float64](tab, js)
	stopProf(filepath.Join(profileDir, name+".cpuprofile"))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s, %d entities: %.0f records/s\n", name, entities, v)
	return nil
}

// startTab is start with the demo page open (a fresh queue, the demo's
// parameters page added) in one tab and delay held before every POST
// /api/notes; stop closes the tab too.
func startTab(ctx context.Context, distDir string, delay time.Duration, page url.Values) (*harness.Tab, func(), error) {
	bn, b, stop, err := start(ctx, distDir)
	if err != nil {
		return nil, nil, err
	}
	bn.delay.Store(int64(delay))
	q := url.Values{}
	for k, v := range page {
		q[k] = v
	}
	tab, err := bn.open(b, q)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return tab, func() { tab.Close(); stop() }, nil
}

// RunFrozen runs the frozen-owner figure of Run alone (runs times) and
// prints every run and the p50/p95.
func RunFrozen(ctx context.Context, w io.Writer, distDir string, runs int) error {
	bn, b, stop, err := start(ctx, distDir)
	if err != nil {
		return err
	}
	defer stop()
	var all []float64
	for i := 0; i < runs; i += FrozenRuns {
		ms, err := bn.frozen(b)
		if err != nil {
			return err
		}
		all = append(all, ms...)
	}
	fmt.Fprintf(w, "frozen owner -> moving: %.0f\np50 %.0f ms, p95 %.0f ms over %d runs\n", all, harness.Percentile(all, 50), harness.Percentile(all, 95), len(all))
	return nil
}
