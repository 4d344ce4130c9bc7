package connbench

import (
	"context"
	"fmt"
	"strconv"

	"github.com/tabfence/tabfence/e2e/harness"
)

// The fan-out figure: a delta from the server's send (the bench's clock
// just before Server.Publish) to applied in every follower tab (the last
// follower's onDelta, page clock), tabfence beside the raw baseline, each
// on a feed of its own on the same endpoint. The sides alternate in blocks
// (the order swapped every block) after an untimed warm-up of both.
const (
	FanoutTabs   = 5   // per side: the leader and four followers
	FanoutDeltas = 100 // timed, per side
	fanoutWarmup = 20
	fanoutBlock  = 10
)

// fanSide is one side's tabs while the figure runs.
type fanSide struct {
	g         *group
	leader    *harness.Tab
	followers []*harness.Tab
	out, lead outcome // to every follower; to the leader alone
	n         int     // deltas published, for their keys
}

// fanout measures both sides (to every follower, and to the leader's own
// onDelta, which shows where the time goes); a side that cannot open
// reports why and the other still runs.
func fanout(ctx context.Context, b *harness.Browser, base string, ep *endpoint) (tf, raw, tfLead, rawLead outcome) {
	sides := []*fanSide{openFanSide(ctx, b, base, sideTF), openFanSide(ctx, b, base, sideRaw)}
	defer func() {
		for _, s := range sides {
			s.g.closeAll()
		}
	}()
	for _, s := range sides {
		for i := 0; i < fanoutWarmup && s.out.err == nil; i++ {
			_, _, s.out.err = s.delta(ctx, ep)
		}
	}
	for r := 0; r < FanoutDeltas/fanoutBlock; r++ {
		for k := range sides {
			s := sides[(k+r)%2]
			for i := 0; i < fanoutBlock && s.out.err == nil; i++ {
				ms, lead, err := s.delta(ctx, ep)
				s.out.xs, s.out.err = append(s.out.xs, ms), err
				s.lead.xs = append(s.lead.xs, lead)
			}
		}
	}
	for _, s := range sides {
		s.lead.err = s.out.err
	}
	return sides[0].out, sides[1].out, sides[0].lead, sides[1].lead
}

func openFanSide(ctx context.Context, b *harness.Browser, base, side string) *fanSide {
	s := &fanSide{g: newGroup(b, base, side, "fanout", prefix+"ws")}
	if s.out.err = s.g.openN(ctx, FanoutTabs); s.out.err != nil {
		return s
	}
	lead, err := s.g.leaderIndex()
	if err != nil {
		s.out.err = err
		return s
	}
	for i, t := range s.g.tabs {
		if i != lead {
			s.followers = append(s.followers, t)
		}
	}
	s.leader = s.g.tabs[lead]
	return s
}

// delta publishes one delta and returns the time until the last follower
// applied it, and until the leader did (ms).
func (s *fanSide) delta(ctx context.Context, ep *endpoint) (all, leader float64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	s.n++
	sentAt, v, err := ep.publish(ctx, s.g.feed, s.g.side+"-"+strconv.Itoa(s.n))
	if err != nil {
		return 0, 0, err
	}
	last := sentAt
	for i, t := range s.followers {
		at, _, err := appliedAt(t, v)
		if err != nil {
			return 0, 0, fmt.Errorf("follower %d: %w", i, err)
		}
		last = max(last, at)
	}
	at, _, err := appliedAt(s.leader, v)
	if err != nil {
		return 0, 0, fmt.Errorf("leader: %w", err)
	}
	return last - sentAt, at - sentAt, nil
}
