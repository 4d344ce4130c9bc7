package connbench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/tabfence/tabfence/e2e/harness"
)

// The pending-resend figure: a follower makes PendingMutations mutations
// while the connection is offline (tabfence: setOffline(true), so the
// leader closes its socket; the raw follower has no way to the socket and
// keeps them in memory), the leader tab closes, and the follower, now the
// leader, resends them. Timed from the close call to the last promise
// resolved (page clock); afterwards the server's rows say how often it
// applied each id.
const (
	PendingRuns      = 5
	PendingMutations = 100
	pendingTimeout   = 60 * time.Second
)

// applyCount is what the server applied over a side's runs.
type applyCount struct{ twice, missing int }

func pendingResend(ctx context.Context, b *harness.Browser, base string, ep *endpoint) (tf, raw outcome, tfApplied, rawApplied applyCount) {
	gs := []*group{newGroup(b, base, sideTF, "pending", prefix+"ws"), newGroup(b, base, sideRaw, "pending", prefix+"ws")}
	outs := make([]outcome, 2)
	counts := make([]applyCount, 2)
	for i, g := range gs {
		defer g.closeAll()
		outs[i].err = g.openN(ctx, 2)
	}
	for r := 0; r < PendingRuns; r++ {
		for k := range gs {
			i := (k + r) % 2
			if outs[i].err != nil {
				continue
			}
			ms, err := pendingOnce(ctx, gs[i], ep, r, &counts[i])
			outs[i].xs, outs[i].err = append(outs[i].xs, ms), err
		}
	}
	return outs[0], outs[1], counts[0], counts[1]
}

func pendingOnce(ctx context.Context, g *group, ep *endpoint, run int, count *applyCount) (float64, error) {
	lead, err := g.leaderIndex()
	if err != nil {
		return 0, err
	}
	leader, f := g.tabs[lead], g.tabs[1-lead]
	if g.side == sideTF {
		if err := goOffline(ctx, leader, f); err != nil {
			return 0, err
		}
	}
	ids := g.scope + "-" + strconv.Itoa(run)
	if _, err := harness.Eval[any](f, `window.__rtb.mutateAll(`+strconv.Itoa(PendingMutations)+`, "`+ids+`"), null`); err != nil {
		return 0, err
	}
	if err := waitFor(ctx, "the mutations pending", pendingTimeout, func() (bool, error) {
		n, err := harness.Eval[int](f, `window.__rtb.pendingCount()`)
		return n == PendingMutations, err
	}); err != nil {
		return 0, err
	}
	closedAt := harness.NowMs()
	g.drop(lead)
	if g.side == sideTF {
		if _, err := harness.Eval[any](f, `window.__rtb.setOffline(false).then(() => null)`); err != nil {
			return 0, err
		}
	}
	st, err := allAcked(ctx, f)
	if err != nil {
		return 0, err
	}
	if err := countApplied(ctx, ep, ids+"-", count); err != nil {
		return 0, err
	}
	_, err = g.open(ctx)
	return st.LastAckAt - closedAt, err
}

// goOffline turns the browser's "work offline" switch on from follower f
// and waits until the leader closed its socket.
func goOffline(ctx context.Context, leader, f *harness.Tab) error {
	if _, err := harness.Eval[any](f, `window.__rtb.setOffline(true).then(() => null)`); err != nil {
		return err
	}
	return waitFor(ctx, "the leader offline", readyTimeout, func() (bool, error) {
		st, err := state(leader)
		return st.State == "offline", err
	})
}

// allAcked waits until every mutation of f resolved.
func allAcked(ctx context.Context, f *harness.Tab) (pageState, error) {
	var st pageState
	err := waitFor(ctx, "every mutation acked", pendingTimeout, func() (bool, error) {
		var err error
		if st, err = state(f); err != nil {
			return false, err
		}
		if len(st.MutErrors) > 0 {
			return false, errors.New("a mutation failed: " + st.MutErrors[0])
		}
		return st.Acks >= PendingMutations, nil
	})
	return st, err
}

// countApplied adds to c the ids of one run the server applied twice or
// not at all.
func countApplied(ctx context.Context, ep *endpoint, idPrefix string, c *applyCount) error {
	got, err := ep.appliedCounts(ctx, idPrefix)
	if err != nil {
		return err
	}
	for i := 0; i < PendingMutations; i++ {
		switch n := got[idPrefix+strconv.Itoa(i)]; {
		case n == 0:
			c.missing++
		case n > 1:
			c.twice++
		}
	}
	if len(got) > PendingMutations {
		return fmt.Errorf("the server applied %d ids, %d were made", len(got), PendingMutations)
	}
	return nil
}
