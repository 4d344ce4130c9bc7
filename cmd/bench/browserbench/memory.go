package browserbench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/heapprofiler"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/tabfence/tabfence/cmd/bench/figures"
	"github.com/tabfence/tabfence/e2e/harness"
)

// The memory figure: ten tabs open at once, as a user with the app open
// in several tabs has them.
const (
	MemoryTabs     = 10
	MemoryEnqueues = 10000
	memoryBatch    = 1000 // enqueues per evaluation, within evalLong's deadline
)

// memoryPages serves the pages of the memory figure: one that loads no
// runtime, and one that loads it and opens an outbox (paused, so the
// records stay in IndexedDB and nothing is sent).
func memoryPages(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/bench/blank.html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, `<!doctype html><title>no runtime</title><script>window.benchReady = true;</script>`)
		case "/bench/memory.html":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_, _ = io.WriteString(w, `<!doctype html><title>tabfence</title><script type="module">
import { load } from "/dist/tabfence.js";
const tf = await load({ wasmURL: "/dist/tabfence.wasm" });
window.benchOutbox = await tf.outbox({ name: "memory-bench", endpoint: "/api/notes", user: "bench",
  headers: (u) => ({ "X-Demo-User": u }), policies: { put: { dedupe: "append" } } });
await benchOutbox.pause();
window.benchReady = true;
</script>`)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// memoryProbe keeps the wasm instance's memory where the bench can read
// its size: Go's linear memory is the module's exported "mem".
const memoryProbe = `(() => {
	const keep = (p) => p.then((r) => { const i = r.instance || r; if (i.exports && i.exports.mem) window.__benchWasmMem = i.exports.mem; return r; });
	const streaming = WebAssembly.instantiateStreaming, plain = WebAssembly.instantiate;
	if (streaming) WebAssembly.instantiateStreaming = (...a) => keep(streaming.apply(WebAssembly, a));
	WebAssembly.instantiate = (...a) => keep(plain.apply(WebAssembly, a));
})();`

// tabMemory is one tab's memory after a full garbage collection: the JS
// heap in use (CDP Runtime.getHeapUsage) and Go's wasm linear memory.
type tabMemory struct{ heap, wasm float64 }

func measureTab(t *harness.Tab) (tabMemory, error) {
	ctx, err := t.CDP()
	if err != nil {
		return tabMemory{}, err
	}
	if _, err := chromedp.Call(ctx, heapprofiler.CollectGarbage, cdp.Empty{}); err != nil {
		return tabMemory{}, err
	}
	u, err := chromedp.Call(ctx, cdpruntime.GetHeapUsage, cdp.Empty{})
	if err != nil {
		return tabMemory{}, err
	}
	wasm, err := harness.Eval[float64](t, `window.__benchWasmMem ? __benchWasmMem.buffer.byteLength : 0`)
	return tabMemory{heap: u.UsedSize, wasm: wasm}, err
}

func openMemoryTabs(b *harness.Browser, url string) ([]*harness.Tab, error) {
	var tabs []*harness.Tab
	for range MemoryTabs {
		t, err := b.NewTab()
		if err == nil {
			tabs = append(tabs, t)
			err = t.AddInitScript(memoryProbe)
		}
		if err == nil {
			err = t.Navigate(url)
		}
		if err == nil {
			_, err = evalLong[bool](t, `new Promise((r) => { const f = () => (window.benchReady ? r(true) : setTimeout(f, 20)); f(); })`)
		}
		if err != nil {
			closeTabs(tabs)
			return nil, err
		}
	}
	return tabs, nil
}

func closeTabs(tabs []*harness.Tab) {
	for _, t := range tabs {
		t.Close()
	}
}

func meanMemory(tabs []*harness.Tab) (tabMemory, error) {
	var sum tabMemory
	for _, t := range tabs {
		m, err := measureTab(t)
		if err != nil {
			return tabMemory{}, err
		}
		sum.heap += m.heap
		sum.wasm += m.wasm
	}
	n := float64(len(tabs))
	return tabMemory{sum.heap / n, sum.wasm / n}, nil
}

// RunMemory measures memory per tab with MemoryTabs tabs open: a page
// without the runtime, the runtime with an outbox open, and the tabs after
// one of them enqueued MemoryEnqueues records.
func RunMemory(ctx context.Context, w io.Writer, distDir string) error {
	return inOwnBrowser(ctx, distDir, memoryPages, func(b *harness.Browser, base string) error {
		return memoryFigures(w, b, base)
	})
}

func memoryFigures(w io.Writer, b *harness.Browser, base string) error {
	blank, err := openMemoryTabs(b, base+"/bench/blank.html")
	if err != nil {
		return fmt.Errorf("page without the runtime: %w", err)
	}
	none, err := meanMemory(blank)
	closeTabs(blank)
	if err != nil {
		return err
	}
	tabs, err := openMemoryTabs(b, base+"/bench/memory.html")
	if err != nil {
		return fmt.Errorf("runtime page: %w", err)
	}
	defer closeTabs(tabs)
	loaded, err := meanMemory(tabs)
	if err != nil {
		return err
	}
	start := time.Now()
	for i := 0; i < MemoryEnqueues; i += memoryBatch {
		if _, err := evalLong[bool](tabs[0], `(async (from, n) => {
			for (let i = from; i < from + n; i++) await benchOutbox.enqueue({ operationType: "put", entityId: "e" + (i % 100), payload: { id: "n" + i, text: "note " + i } });
			return true;
		})(`+strconv.Itoa(i)+`, `+strconv.Itoa(memoryBatch)+`)`); err != nil {
			return fmt.Errorf("enqueues: %w", err)
		}
	}
	took := time.Since(start)
	busy, err := measureTab(tabs[0])
	if err != nil {
		return err
	}
	others, err := meanMemory(tabs[1:])
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "memory: %d tabs open at once; after a full GC (CDP), JS heap in use (Runtime.getHeapUsage, the tab's isolate) and Go's wasm linear memory; %d enqueues in one tab (queue paused) took %v\n",
		MemoryTabs, MemoryEnqueues, took.Round(time.Millisecond))
	tw := figures.NewTable(w)
	fmt.Fprintln(tw, "figure\tJS heap (MB)\twasm memory (MB)\tJS heap + wasm (MB)\t")
	row := func(name string, m tabMemory) {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t\n", name, mb(m.heap), mb(m.wasm), mb(m.heap+m.wasm))
	}
	row(fmt.Sprintf("page without the runtime, per tab (%d tabs)", MemoryTabs), none)
	row(fmt.Sprintf("runtime loaded, outbox open, per tab (%d tabs)", MemoryTabs), loaded)
	row(fmt.Sprintf("the tab after %d enqueues", MemoryEnqueues), busy)
	row(fmt.Sprintf("the other %d tabs after them, per tab", MemoryTabs-1), others)
	return tw.Flush()
}

func mb(n float64) float64 { return n / (1 << 20) }
