package browserbench

import (
	"context"
	"fmt"
	"io"

	"github.com/tabfence/tabfence/cmd/bench/figures"
	"github.com/tabfence/tabfence/e2e/harness"
)

// RunFirefox measures failover and cold start in Firefox ESR (over
// WebDriver BiDi) beside raw Web Locks in the same browser, so that the
// ratio to the browser's own lock hand-over holds across engines. Timers of
// background pages are unthrottled as in Chromium's run; Firefox's clock
// has 1 ms resolution on pages that are not cross-origin isolated, so these
// figures are whole milliseconds.
func RunFirefox(ctx context.Context, w io.Writer, distDir string) error {
	srv, err := serve(distDir, nil)
	if err != nil {
		return err
	}
	defer srv.Close()
	b, err := harness.Start(ctx, harness.Options{Browser: harness.KindFirefox})
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(w, "Firefox ESR: failover %d runs each, interleaved (close the leader tab -> next tab's onLeader); cold start %d fresh loads, cache bypassed\n", FailoverRuns, ColdStartRuns)
	tfc, rawc, err := failover(ctx, b, srv.URL)
	if err != nil {
		return fmt.Errorf("firefox failover: %w", err)
	}
	cold, err := coldStart(ctx, b, srv.URL)
	if err != nil {
		return fmt.Errorf("firefox cold start: %w", err)
	}
	tf, raw := tfc.closeToLead, rawc.closeToLead
	tw := figures.NewTable(w)
	fmt.Fprintln(tw, "figure (Firefox)\ttabfence\traw JS\ttarget\tmet\t")
	tp95, rp95 := percentile(tf, 95), percentile(raw, 95)
	fmt.Fprintf(tw, "failover p50 (ms)\t%.0f\t%.0f\t\t\t\n", percentile(tf, 50), percentile(raw, 50))
	fmt.Fprintf(tw, "failover p95 (ms)\t%.0f\t%.0f\t<= raw+%d\t%s\t\n", tp95, rp95, targetFailoverOverRawMs, yes(tp95 <= rp95+targetFailoverOverRawMs))
	fmt.Fprintf(tw, "lock grant -> onLeader p50 (ms)\t%.0f\t%.0f\t\t\t\n", percentile(tfc.grantToLead, 50), percentile(rawc.grantToLead, 50))
	cp50 := percentile(cold, 50)
	fmt.Fprintf(tw, "cold start p50 (ms)\t%.0f\t\t< %d\t%s\t\n", cp50, targetColdStartMs, yes(cp50 < targetColdStartMs))
	fmt.Fprintf(tw, "cold start p95 (ms)\t%.0f\t\t\t\t\n", percentile(cold, 95))
	return tw.Flush()
}
