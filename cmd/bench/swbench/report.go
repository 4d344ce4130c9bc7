package swbench

import (
	"fmt"
	"io"
	"slices"

	benchfigures "github.com/tabfence/tabfence/cmd/bench/figures"
	"github.com/tabfence/tabfence/e2e/harness"
)

func pick(fs []flush, f func(flush) float64) []float64 {
	out := make([]float64, len(fs))
	for i, x := range fs {
		out[i] = f(x)
	}
	return out
}

func last(f flush) float64    { return f.last }
func first(f flush) float64   { return f.first }
func fence(f flush) float64   { return f.fence }
func running(f flush) float64 { return f.running }

// ratios is, per round, the tab's time over the worker's: the worker's
// rate relative to the tab's (above 1: the worker drains faster).
func ratios(tab, worker []flush) []float64 {
	out := make([]float64, 0, len(tab))
	for i := range min(len(tab), len(worker)) {
		out = append(out, tab[i].last/worker[i].last)
	}
	return out
}

func ratioCell(rs []float64) string {
	if len(rs) == 0 {
		return ""
	}
	return fmt.Sprintf("%.2fx [%.2f-%.2f]", harness.Percentile(rs, 50), slices.Min(rs), slices.Max(rs))
}

func printTables(w io.Writer, r results) error {
	if len(r.tab) == 0 || len(r.starts) == 0 {
		return errNoRounds
	}
	p := harness.Percentile
	tw := benchfigures.NewTable(w)
	fmt.Fprintln(tw, "figure\ttab\twarm worker\tcold worker\t")
	row := func(name string, f func(flush) float64, pc float64) {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t\n", name, p(pick(r.tab, f), pc), p(pick(r.warm, f), pc), p(pick(r.cold, f), pc))
	}
	row(fmt.Sprintf("trigger -> last of %d answered, p50 (ms)", N), last, 50)
	row(fmt.Sprintf("trigger -> last of %d answered, p95 (ms)", N), last, 95)
	fmt.Fprintf(tw, "records/s (p50 round)\t%.0f\t%.0f\t%.0f\t\n", N/p(pick(r.tab, last), 50)*1000, N/p(pick(r.warm, last), 50)*1000, N/p(pick(r.cold, last), 50)*1000)
	fmt.Fprintf(tw, "worker's rate / the tab's, per round: median [range]\t\t%s\t%s\t\n", ratioCell(ratios(r.tab, r.warm)), ratioCell(ratios(r.tab, r.cold)))
	row("trigger -> fencing token request, p50 (ms)", fence, 50)
	row("trigger -> first send, p50 (ms)", first, 50)
	extra := func(fs []flush) (n int) {
		for _, f := range fs {
			n += f.extra
		}
		return n
	}
	fmt.Fprintf(tw, "sends beyond one per mutation, all rounds\t%d\t%d\t%d\t\n", extra(r.tab), extra(r.warm), extra(r.cold))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "sends the server saw that were not a new effect, in the whole part (untimed flushes and cold starts included): %d\n", r.extra)
	fmt.Fprintf(w, "cold start: %d runs, one mutation queued, CDP stopWorker -> dispatchSyncEvent; the runtime from the worker's Cache API copy (the untimed first run stored it)\n", len(r.starts))
	cs := benchfigures.NewTable(w)
	fmt.Fprintln(cs, "cold start\tp50\tp95\tmax\t")
	crow := func(name string, f func(flush) float64) {
		xs := pick(r.starts, f)
		fmt.Fprintf(cs, "%s\t%.0f\t%.0f\t%.0f\t\n", name, p(xs, 50), p(xs, 95), slices.Max(xs))
	}
	crow("stopped worker: sync event -> CDP reports it running (ms)", running)
	crow("stopped worker: sync event -> fencing token request (ms)", fence)
	crow("stopped worker: sync event -> first send (ms)", first)
	crow("stopped worker: sync event -> its answer (ms)", last)
	return cs.Flush()
}
