// Package browserbench measures tabfence's browser runtime in headless
// Chromium beside a raw-JavaScript baseline measured the same way in the
// same run: absolute times drift on a shared machine, the comparison holds.
//
// Figures: failover latency (close the leader tab → the next tab's onLeader,
// timed from the close call to the page's own timestamp), the size of
// tabfence.wasm as users download it (raw, gzip -9, brotli), cold start
// (fetch + instantiate + ready, HTTP cache disabled); the fencing figures
// (fence.go: token allocations, fenced applies, the channel round trip);
// the watchdog's takeover of a frozen leader (watchdog.go); and the runtime
// as tabfence serve sends it, on the wire and from the cache (serving.go).
package browserbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/e2e/harness"

	"github.com/tabfence/tabfence/cmd/bench/figures"
)

// Runs per figure: enough for a p95 of failovers and of loads.
const (
	FailoverRuns  = 30
	ColdStartRuns = 20
)

// Targets of the browser runtime.
const (
	targetFailoverOverRawMs = 10  // tabfence failover p95 at most this much above raw
	targetBrotliKB          = 700 // the whole runtime's download budget
	targetColdStartMs       = 150 // p50
)

// Run measures and prints a table to w. distDir holds the built runtime
// (make build). The fencing figures are RunFence's: a browser of their own,
// as the outbox's have, since the failover and cold-start runs leave
// dozens of closed tabs' processes and databases behind in this one.
func Run(ctx context.Context, w io.Writer, distDir string) error {
	srv, err := serve(distDir, nil)
	if err != nil {
		return err
	}
	defer srv.Close()
	sz, err := measureSizes(distDir, "tabfence.wasm")
	if err != nil {
		return err
	}
	core, err := measureSizes(distDir, "tabfence-core.wasm")
	if err != nil {
		return err
	}
	// Background throttling off: these are latency figures, and a hidden
	// tab's throttled timers would measure Chromium's policy, not the code.
	b, err := harness.Start(ctx, harness.Options{Bare: true})
	if err != nil {
		return err
	}
	defer b.Close()

	fmt.Fprintf(w, "failover: %d runs each, interleaved; close the leader tab -> next tab's onLeader (close call to page timestamp);\n", FailoverRuns)
	fmt.Fprintf(w, "  lock grant -> onLeader isolates the runtime's own cost (grant time from a probe wrapping navigator.locks.request)\n")
	tfc, rawc, err := failover(ctx, b, srv.URL)
	if err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	tf, raw := tfc.closeToLead, rawc.closeToLead
	fmt.Fprintf(w, "cold start: %d fresh page loads, HTTP cache disabled, load() start -> ready\n", ColdStartRuns)
	cold, err := coldStart(ctx, b, srv.URL)
	if err != nil {
		return fmt.Errorf("cold start: %w", err)
	}

	tw := figures.NewTable(w)
	fmt.Fprintln(tw, "figure\ttabfence\traw JS\ttarget\tmet\t")
	tp50, tp95 := percentile(tf, 50), percentile(tf, 95)
	rp50, rp95 := percentile(raw, 50), percentile(raw, 95)
	fmt.Fprintf(tw, "failover p50 (ms)\t%.1f\t%.1f\t\t\t\n", tp50, rp50)
	fmt.Fprintf(tw, "failover p95 (ms)\t%.1f\t%.1f\t<= raw+%d\t%s\t\n", tp95, rp95, targetFailoverOverRawMs, yes(tp95 <= rp95+targetFailoverOverRawMs))
	fmt.Fprintf(tw, "failover max (ms)\t%.1f\t%.1f\t\t\t\n", percentile(tf, 100), percentile(raw, 100))
	fmt.Fprintf(tw, "lock grant -> onLeader p50 (ms)\t%.1f\t%.1f\t\t\t\n", percentile(tfc.grantToLead, 50), percentile(rawc.grantToLead, 50))
	fmt.Fprintf(tw, "lock grant -> onLeader p95 (ms)\t%.1f\t%.1f\t\t\t\n", percentile(tfc.grantToLead, 95), percentile(rawc.grantToLead, 95))
	fmt.Fprintf(tw, "wasm raw (KB)\t%.0f\t\t\t\t\n", kb(sz.raw))
	fmt.Fprintf(tw, "wasm gzip -9 (KB)\t%.0f\t\t\t\t\n", kb(sz.gzip))
	if sz.brotli > 0 {
		fmt.Fprintf(tw, "wasm brotli (KB)\t%.0f\t\t< %d\t%s\t\n", kb(sz.brotli), targetBrotliKB, yes(kb(sz.brotli) < targetBrotliKB))
		fmt.Fprintf(tw, "core wasm (no outbox) brotli (KB)\t%.0f\t\t< %d\t%s\t\n", kb(core.brotli), targetBrotliKB, yes(kb(core.brotli) < targetBrotliKB))
	} else {
		fmt.Fprintf(tw, "wasm brotli (KB)\tnot measured (no brotli on PATH)\t\t< %d\t\t\n", targetBrotliKB)
	}
	cp50 := percentile(cold, 50)
	fmt.Fprintf(tw, "cold start p50 (ms)\t%.1f\t\t< %d\t%s\t\n", cp50, targetColdStartMs, yes(cp50 < targetColdStartMs))
	fmt.Fprintf(tw, "cold start p95 (ms)\t%.1f\t\t\t\t\n", percentile(cold, 95))
	return tw.Flush()
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func kb(n int) float64 { return float64(n) / 1024 }

// chain is one election being benchmarked: a leader tab and a tab queued
// behind it, on one page (the demo, or the raw Web Locks page).
type chain struct {
	b            *harness.Browser
	url, lock    string
	leader, next *harness.Tab
	closeToLead  []float64 // close call -> page's onLeader
	grantToLead  []float64 // browser grants the lock -> page's onLeader
}

func newChain(ctx context.Context, b *harness.Browser, base, page, scope string) (*chain, error) {
	scope += "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	c := &chain{b: b, url: base + "/" + page + "?" + url.Values{"scope": {scope}, "protocol": {"1"}, "fenced": {"0"}}.Encode(),
		lock: "tabfence:" + scope + ":v1"}
	var err error
	if c.leader, err = c.open(); err != nil {
		return nil, err
	}
	if _, err = c.leader.WaitEvent("leader", 1, 30*time.Second); err != nil {
		c.close()
		return nil, err
	}
	if c.next, err = c.openQueued(ctx); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// open opens a tab of the chain's page with the lock-grant probe installed.
func (c *chain) open() (*harness.Tab, error) {
	t, err := c.b.NewTab()
	if err != nil {
		return nil, err
	}
	if err := installGrantProbe(t); err != nil {
		t.Close()
		return nil, err
	}
	if err := t.Navigate(c.url); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

func (c *chain) openQueued(ctx context.Context) (*harness.Tab, error) {
	t, err := c.open()
	if err != nil {
		return nil, err
	}
	if err := queued(ctx, t, c.lock); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// step closes the leader, times the takeover and queues a fresh tab.
func (c *chain) step(ctx context.Context) error {
	closedAt := harness.NowMs()
	c.leader.Close()
	ev, err := c.next.WaitEvent("leader", 1, 30*time.Second)
	if err != nil {
		return err
	}
	granted, err := harness.Eval[float64](c.next, `window.__tabfenceBenchGrants?.[`+strconv.Quote(c.lock)+`] || 0`)
	if err != nil {
		return err
	}
	c.closeToLead = append(c.closeToLead, ev.At-closedAt)
	if granted > 0 {
		c.grantToLead = append(c.grantToLead, ev.At-granted)
	}
	c.leader = c.next
	c.next, err = c.openQueued(ctx)
	return err
}

func (c *chain) close() {
	for _, t := range []*harness.Tab{c.leader, c.next} {
		if t != nil {
			t.Close()
		}
	}
}

// failover measures FailoverRuns takeovers of tabfence and of the raw page,
// interleaved run by run so that both see the same machine load.
func failover(ctx context.Context, b *harness.Browser, base string) (tf, raw *chain, err error) {
	if tf, err = newChain(ctx, b, base, "", "bench-tf"); err != nil {
		return nil, nil, err
	}
	if raw, err = newChain(ctx, b, base, "raw-locks.html", "bench-raw"); err != nil {
		tf.close()
		return nil, nil, err
	}
	defer tf.close()
	defer raw.close()
	for range FailoverRuns {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if err := tf.step(ctx); err != nil {
			return nil, nil, errors.New("tabfence: " + err.Error())
		}
		if err := raw.step(ctx); err != nil {
			return nil, nil, errors.New("raw JS: " + err.Error())
		}
	}
	return tf, raw, nil
}

// queued waits until the tab's request waits in the lock's queue: the
// browser's lock manager lists exactly one pending request for name.
func queued(ctx context.Context, t *harness.Tab, name string) error {
	return harness.Poll(ctx, "a queued request for "+name, 30*time.Second, 10*time.Millisecond, func() (bool, error) {
		st, err := t.Locks(name)
		return st.Held == 1 && st.Pending == 1, err
	})
}

// coldStart loads the demo ColdStartRuns times in fresh tabs with the HTTP
// cache disabled and reads the page's own load() timing: wasm_exec.js,
// fetch, compile, instantiate and the runtime's ready signal.
func coldStart(ctx context.Context, b *harness.Browser, base string) ([]float64, error) {
	var out []float64
	for i := range ColdStartRuns {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t, err := b.NewTab()
		if err != nil {
			return nil, err
		}
		ms, err := loadOnce(t, base+"/?"+url.Values{"scope": {"bench-cold-" + strconv.Itoa(i)}}.Encode())
		t.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, ms)
	}
	return out, nil
}

func loadOnce(t *harness.Tab, pageURL string) (float64, error) {
	if err := disableCache(t); err != nil {
		return 0, err
	}
	return loadTimed(t, pageURL)
}

// loadTimed loads the demo in t and returns the page's own load() time.
func loadTimed(t *harness.Tab, pageURL string) (float64, error) {
	if err := t.Navigate(pageURL); err != nil {
		return 0, err
	}
	if _, err := t.WaitEvent("ready", 1, 30*time.Second); err != nil {
		return 0, err
	}
	ms, err := harness.Eval[float64](t, `tabfenceDemo.timings.loadEnd - tabfenceDemo.timings.loadStart`)
	if err == nil && !(ms > 0) {
		err = errors.New("page reported no load timing")
	}
	return ms, err
}

// serve serves the runtime built in distDir (see server.StartLocal),
// failing clearly when it was not built.
func serve(distDir string, mw func(http.Handler) http.Handler) (*server.Local, error) {
	if err := harness.CheckDist(distDir); err != nil {
		return nil, err
	}
	return server.StartLocal(distDir, mw)
}

// inOwnBrowser serves distDir (with mw in front) and starts a browser of
// its own for fn, then stops both.
func inOwnBrowser(ctx context.Context, distDir string, mw func(http.Handler) http.Handler, fn func(b *harness.Browser, base string) error) error {
	srv, err := serve(distDir, mw)
	if err != nil {
		return err
	}
	defer srv.Close()
	b, err := harness.Start(ctx, harness.Options{Bare: true})
	if err != nil {
		return err
	}
	defer b.Close()
	return fn(b, srv.URL)
}
