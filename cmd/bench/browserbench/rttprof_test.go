//go:build e2e

package browserbench

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/profiler"
	"github.com/chromedp/chromedp"

	"github.com/tabfence/tabfence/e2e/harness"
)

// TABFENCE_RTT_PROFILE=dir writes CPU profiles of both tabs during the
// first round of TestChannelRTT (dir/x.cpuprofile, dir/y.cpuprofile).
func init() {
	dir := os.Getenv("TABFENCE_RTT_PROFILE")
	if dir == "" {
		return
	}
	rttProfile = func(x, y *harness.Tab) func() {
		for _, t := range []*harness.Tab{x, y} {
			ctx, err := t.CDP()
			if err != nil {
				continue
			}
			chromedp.Call(ctx, profiler.Enable, cdp.Empty{})
			chromedp.Call(ctx, profiler.SetSamplingInterval, profiler.SetSamplingIntervalParams{Interval: 50})
			chromedp.Call(ctx, profiler.Start, cdp.Empty{})
		}
		return func() {
			for name, t := range map[string]*harness.Tab{"x": x, "y": y} {
				ctx, err := t.CDP()
				if err != nil {
					continue
				}
				res, err := chromedp.Call(ctx, profiler.Stop, cdp.Empty{})
				if err != nil {
					continue
				}
				b, _ := json.Marshal(res.Profile)
				os.WriteFile(filepath.Join(dir, name+".cpuprofile"), b, 0o644)
			}
		}
	}
}
