package browserbench

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tabfence/tabfence/cmd/bench/figures"
	"github.com/tabfence/tabfence/e2e/harness"
)

// Targets of the runtime as tabfence serve sends it.
const (
	targetFirstWireKB     = 700 // the runtime's bytes on the wire, first visit
	targetRepeatWireKB    = 1   // the same, a repeat visit
	targetRepeatColdMs    = 60  // cold start p50 of a repeat visit
	servingColdStartRuns  = ColdStartRuns
	servingRepeatWarmups  = 2 // loads before the repeat runs: the HTTP cache and V8's code cache fill
	servingReadyTimeout   = 30 * time.Second
	servingRuntimePrefix  = "/dist/"
	servingModuleFileName = "/dist/tabfence.wasm"
)

// wire is what one page load moved for the runtime (every /dist/ file).
type wire struct {
	runtime, module float64 // bytes on the wire (CDP encodedDataLength)
	requests        int     // requests that reached the network
}

// RunServing measures the runtime as `tabfence serve` sends it (compressed,
// revalidated by ETag): its bytes on the wire for a first and a repeat
// visit of the demo, and cold start (load() start -> ready) p50 of both,
// first visits with the HTTP cache disabled and repeat visits with it warm
// (V8 then takes the compiled module from its code cache), interleaved.
func RunServing(ctx context.Context, w io.Writer, distDir string) error {
	srv, err := serve(distDir, nil)
	if err != nil {
		return err
	}
	defer srv.Close()
	b, err := harness.Start(ctx, harness.Options{Bare: true})
	if err != nil {
		return err
	}
	defer b.Close()
	page := srv.URL + "/?" + url.Values{"scope": {"bench-serving"}}.Encode()
	first, repeat, err := visitWire(b, page)
	if err != nil {
		return fmt.Errorf("bytes on the wire: %w", err)
	}
	fmt.Fprintf(w, "serving: the demo through tabfence serve; bytes on the wire of every /dist/ file (CDP encodedDataLength: headers + body as sent);\n")
	fmt.Fprintf(w, "  cold start: %d runs each, interleaved, load() start -> ready; first visit with the HTTP cache disabled, repeat visit with it warm\n", servingColdStartRuns)
	firstMs, repeatMs, err := servingColdStarts(ctx, b, srv.URL)
	if err != nil {
		return fmt.Errorf("cold start: %w", err)
	}
	tw := figures.NewTable(w)
	fmt.Fprintln(tw, "figure\ttabfence\ttarget\tmet\t")
	fk, rk := first.runtime/1024, repeat.runtime/1024
	fmt.Fprintf(tw, "runtime on the wire, first visit (KB)\t%.1f\t<= %d\t%s\t\n", fk, targetFirstWireKB, yes(fk <= targetFirstWireKB))
	fmt.Fprintf(tw, "  of which tabfence.wasm (KB)\t%.1f\t\t\t\n", first.module/1024)
	fmt.Fprintf(tw, "runtime on the wire, repeat visit (KB)\t%.2f\t<= %d\t%s\t\n", rk, targetRepeatWireKB, yes(rk <= targetRepeatWireKB))
	fmt.Fprintf(tw, "runtime requests, first / repeat visit\t%d / %d\t\t\t\n", first.requests, repeat.requests)
	f50, r50 := percentile(firstMs, 50), percentile(repeatMs, 50)
	fmt.Fprintf(tw, "cold start p50, first visit (ms)\t%.1f\t\t\t\n", f50)
	fmt.Fprintf(tw, "cold start p50, repeat visit (ms)\t%.1f\t<= %d\t%s\t\n", r50, targetRepeatColdMs, yes(r50 <= targetRepeatColdMs))
	fmt.Fprintf(tw, "cold start p95, first / repeat visit (ms)\t%.1f / %.1f\t\t\t\n", percentile(firstMs, 95), percentile(repeatMs, 95))
	return tw.Flush()
}

// visitWire loads the page twice in one tab, the browser's cache empty at
// first, and returns what each load moved for the runtime.
func visitWire(b *harness.Browser, page string) (first, repeat wire, err error) {
	t, err := b.NewTab()
	if err != nil {
		return wire{}, wire{}, err
	}
	defer t.Close()
	log, err := t.WatchNetwork()
	if err != nil {
		return wire{}, wire{}, err
	}
	for i, out := range []*wire{&first, &repeat} {
		log.Reset()
		if err := t.Navigate(page + "&visit=" + strconv.Itoa(i)); err != nil {
			return wire{}, wire{}, err
		}
		if _, err := t.WaitEvent("ready", 1, servingReadyTimeout); err != nil {
			return wire{}, wire{}, err
		}
		if *out, err = runtimeWire(log); err != nil {
			return wire{}, wire{}, err
		}
	}
	return first, repeat, nil
}

// runtimeWire sums the finished /dist/ transfers, once every one finished.
func runtimeWire(log *harness.NetLog) (wire, error) {
	var out wire
	err := harness.Poll(context.Background(), "the runtime's transfers finish", servingReadyTimeout, 20*time.Millisecond, func() (bool, error) {
		out = wire{}
		seen := false
		for _, tr := range log.Transfers() {
			u, err := url.Parse(tr.URL)
			if err != nil || !strings.HasPrefix(u.Path, servingRuntimePrefix) {
				continue
			}
			if !tr.Finished {
				return false, nil
			}
			seen = seen || u.Path == servingModuleFileName
			out.runtime += tr.Wire
			if u.Path == servingModuleFileName {
				out.module += tr.Wire
			}
			if !tr.FromCache {
				out.requests++
			}
		}
		return seen, nil
	})
	return out, err
}

// servingColdStarts times first visits (cache disabled in that tab) and
// repeat visits (a fresh tab, the cache warm), one of each per run.
func servingColdStarts(ctx context.Context, b *harness.Browser, base string) (first, repeat []float64, err error) {
	page := func(kind string, i int) string {
		return base + "/?" + url.Values{"scope": {"bench-serving-" + kind + "-" + strconv.Itoa(i)}}.Encode()
	}
	for i := range servingRepeatWarmups {
		if _, err := visitOnce(b, page("warm", i), false); err != nil {
			return nil, nil, err
		}
	}
	for i := range servingColdStartRuns {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		ms, err := visitOnce(b, page("first", i), true)
		if err != nil {
			return nil, nil, err
		}
		first = append(first, ms)
		if ms, err = visitOnce(b, page("repeat", i), false); err != nil {
			return nil, nil, err
		}
		repeat = append(repeat, ms)
	}
	return first, repeat, nil
}

// visitOnce loads the demo in a fresh tab and returns its load() time.
func visitOnce(b *harness.Browser, pageURL string, noCache bool) (float64, error) {
	t, err := b.NewTab()
	if err != nil {
		return 0, err
	}
	defer t.Close()
	if !noCache {
		return loadTimed(t, pageURL)
	}
	return loadOnce(t, pageURL)
}
