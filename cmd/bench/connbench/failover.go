package connbench

import (
	"context"
	"errors"
	"strconv"

	"github.com/tabfence/tabfence/e2e/harness"
)

// FailoverRuns is how many leader tabs each side closes in the failover
// figure: close the leader, publish a delta at once, time from the close
// call to the delta applied in the new leader (its onDelta, page clock).
// The new leader dials, says hello with the version it holds and gets the
// delta from the server's catch-up (or live, when it was already there).
const FailoverRuns = 20

func failover(ctx context.Context, b *harness.Browser, base string, ep *endpoint) (tf, raw outcome) {
	gs := []*group{newGroup(b, base, sideTF, "failover", prefix+"ws"), newGroup(b, base, sideRaw, "failover", prefix+"ws")}
	outs := make([]outcome, 2)
	for i, g := range gs {
		defer g.closeAll()
		outs[i].err = g.openN(ctx, 2)
	}
	for r := 0; r < FailoverRuns; r++ {
		for k := range gs {
			i := (k + r) % 2
			if outs[i].err != nil {
				continue
			}
			ms, err := failoverOnce(ctx, gs[i], ep, r)
			outs[i].xs, outs[i].err = append(outs[i].xs, ms), err
		}
	}
	return outs[0], outs[1]
}

// failoverOnce closes g's leader (of two tabs), times the first delta in
// the other, and queues a fresh tab behind the new leader.
func failoverOnce(ctx context.Context, g *group, ep *endpoint, run int) (float64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	lead, err := g.leaderIndex()
	if err != nil {
		return 0, err
	}
	next := g.tabs[1-lead]
	closedAt := harness.NowMs()
	g.drop(lead)
	_, v, err := ep.publish(ctx, g.feed, "failover-"+strconv.Itoa(run))
	if err != nil {
		return 0, err
	}
	at, leader, err := appliedAt(next, v)
	if err != nil {
		return 0, err
	}
	if !leader {
		return 0, errors.New(g.side + ": the delta after the failover was applied by a tab that did not lead")
	}
	_, err = g.open(ctx)
	return at - closedAt, err
}
