package browserbench

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/tabfence/tabfence/e2e/harness"
	"github.com/tabfence/tabfence/locks"

	"github.com/tabfence/tabfence/cmd/bench/figures"
)

// The election watchdog's figure: a leader frozen (CDP Page lifecycle
// "frozen": no timers, so no heartbeats, its Web Lock kept) -> the other
// tab's onLeader, after its watchdog stole, timed from the freeze call to
// the page's timestamp; and how many of the frozen leader's writes, made
// with its old context at once after it was resumed (and after the new
// leader's first write), were accepted. Each run's thief, a fresh visible
// tab, is the next run's frozen leader.
const (
	WatchdogRuns       = 20
	watchdogStallAfter = locks.DefaultStallAfter
	targetWatchdogOver = 500 // ms over stallAfter at p95
)

// RunWatchdog measures and prints the watchdog's figure in a browser of
// its own.
func RunWatchdog(ctx context.Context, w io.Writer, distDir string) error {
	return inOwnBrowser(ctx, distDir, nil, func(b *harness.Browser, base string) error {
		return watchdogFigures(ctx, w, b, base)
	})
}

func watchdogFigures(ctx context.Context, w io.Writer, b *harness.Browser, base string) error {
	stall := int(watchdogStallAfter / time.Millisecond)
	scope := "bench-watchdog-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	u := base + "/?" + url.Values{"scope": {scope}, "protocol": {"1"}, "stallAfter": {strconv.Itoa(stall)}}.Encode()
	open := func(want string) (*harness.Tab, error) {
		t, err := b.Open(u)
		if err != nil {
			return nil, err
		}
		if _, err := t.WaitEvent(want, 1, 30*time.Second); err != nil {
			t.Close()
			return nil, err
		}
		return t, nil
	}
	// A fresh follower per run: a page resumed after CDP's freeze stays
	// "hidden", and a hidden tab never steals.
	leader, err := open("leader")
	if err != nil {
		return err
	}
	defer func() { leader.Close() }()
	var took []float64
	staleAccepted, newRejected := 0, 0
	for i := 0; i < WatchdogRuns; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		next, err := open("follower")
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		r, err := harness.FreezeLeader(leader, next, 1, 3*watchdogStallAfter)
		leader.Close()
		leader = next
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		took = append(took, r.Took())
		if r.OldWrite == "accepted" {
			staleAccepted++
		}
		if r.NewWrite != "accepted" {
			newRejected++
		}
	}

	fmt.Fprintf(w, "watchdog: %d takeovers, stallAfter %d ms (the default); freeze the leader (CDP) -> the follower's watchdog steals -> its onLeader\n", WatchdogRuns, stall)
	fmt.Fprintf(w, "  (freeze call to page timestamp); then the new leader writes, the old one is resumed and writes at once with its old context\n")
	tw := figures.NewTable(w)
	fmt.Fprintln(tw, "figure\ttabfence\ttarget\tmet\t")
	p95 := percentile(took, 95)
	fmt.Fprintf(tw, "frozen leader -> new onLeader p50 (ms)\t%.0f\t\t\t\n", percentile(took, 50))
	fmt.Fprintf(tw, "frozen leader -> new onLeader p95 (ms)\t%.0f\t<= %d\t%s\t\n", p95, stall+targetWatchdogOver, yes(p95 <= float64(stall+targetWatchdogOver)))
	fmt.Fprintf(tw, "frozen leader -> new onLeader min/max (ms)\t%.0f / %.0f\t\t\t\n", percentile(took, 0), percentile(took, 100))
	fmt.Fprintf(tw, "stale writes accepted (of %d)\t%d\t0\t%s\t\n", WatchdogRuns, staleAccepted, yes(staleAccepted == 0))
	fmt.Fprintf(tw, "new leader's first writes not accepted\t%d\t0\t%s\t\n", newRejected, yes(newRejected == 0))
	return tw.Flush()
}
