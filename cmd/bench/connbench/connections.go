package connbench

import (
	"context"
	"fmt"
	"time"

	"github.com/tabfence/tabfence/cmd/tabfence/server"
	"github.com/tabfence/tabfence/e2e/harness"
)

// ConnTabs are the numbers of tabs of one scope the connections figure opens.
var ConnTabs = []int{1, 5, 10}

// counter reads an endpoint's open and accepted connections.
type counter struct {
	where  string // which endpoint, for the figure's text
	wsPath string
	read   func() (open, accepted int64)
}

// tfCounter is the demo server's /realtime when it reports its counters,
// else the bench's own endpoint.
func tfCounter(l *server.Local, ep *endpoint) counter {
	if _, ok := demoStats(l); ok {
		return counter{where: "the demo server's /realtime", wsPath: "/realtime", read: func() (int64, int64) {
			s, _ := demoStats(l)
			return s.Open, s.Accepted
		}}
	}
	return benchCounter(ep)
}

func benchCounter(ep *endpoint) counter {
	return counter{where: "the bench's endpoint", wsPath: prefix + "ws", read: func() (int64, int64) {
		s := ep.srv.Stats()
		return s.Open, s.Accepted
	}}
}

// connCount is one group's figure: connections open once every tab is
// ready, and connections accepted while the tabs joined.
type connCount struct {
	open, accepted int64
	err            error
}

// connections opens k tabs of one scope for each k of ConnTabs, tabfence
// (one socket per browser) beside the raw baseline with a socket per tab,
// and counts the server's connections once every tab is ready: a mutation
// from the last tab came back to every tab as a delta.
func connections(ctx context.Context, b *harness.Browser, base string, tfc, rawc counter) (tf, raw []connCount) {
	var tfErr error
	for _, k := range ConnTabs {
		if tfErr == nil {
			c := countGroup(ctx, newGroup(b, base, sideTF, "conns", tfc.wsPath), k, tfc)
			tfErr = c.err
			tf = append(tf, c)
		} else {
			tf = append(tf, connCount{err: tfErr})
		}
		g := newGroup(b, base, sideRaw, "conns", rawc.wsPath)
		g.role = "each"
		raw = append(raw, countGroup(ctx, g, k, rawc))
	}
	return tf, raw
}

func countGroup(ctx context.Context, g *group, k int, c counter) connCount {
	defer g.closeAll()
	// The last group's sockets close once their tabs are gone.
	if err := waitFor(ctx, "no connection open on "+c.where, 15*time.Second, func() (bool, error) {
		open, _ := c.read()
		return open == 0, nil
	}); err != nil {
		return connCount{err: err}
	}
	_, before := c.read()
	if err := g.openN(ctx, k); err != nil {
		return connCount{err: fmt.Errorf("%d tab(s): %w", k, err)}
	}
	if err := g.probe(ctx); err != nil {
		return connCount{err: fmt.Errorf("%d tab(s): %w", k, err)}
	}
	open, accepted := c.read()
	return connCount{open: open, accepted: accepted - before}
}
