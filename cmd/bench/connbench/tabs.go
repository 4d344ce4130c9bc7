package connbench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tabfence/tabfence/e2e/harness"
)

// Deadlines: every wait of the bench ends, with an error saying what it
// waited for.
const (
	readyTimeout = 30 * time.Second // a tab loads and joins (the runtime compiles)
	deltaTimeout = 10 * time.Second // one published delta reaches a tab
	pollEvery    = 10 * time.Millisecond
)

// Sides of a figure.
const (
	sideTF  = "tf"
	sideRaw = "raw"
)

// errUnavailable marks a side the build cannot run (no tf.connection):
// the figure prints "not measured" instead of failing the part.
var errUnavailable = errors.New("not available")

// pageState is window.__rtb as the bench reads it.
type pageState struct {
	Ready, Joined, Leader bool
	State                 string
	Version               float64
	Error, Unavailable    string
	Acks                  int
	LastAckAt             float64
	MutErrors             []string
}

const stateJS = `(() => { const r = window.__rtb; if (!r) return {State: "no page"};
	return {Ready: r.ready, Joined: r.joined, Leader: r.leader, State: String(r.state), Version: r.version,
		Error: r.error || "", Unavailable: r.unavailable || "", Acks: r.acks, LastAckAt: r.lastAckAt,
		MutErrors: r.mutErrors.slice(0, 3)}; })()`

func state(t *harness.Tab) (pageState, error) { return harness.Eval[pageState](t, stateJS) }

// group is the tabs of one side on one scope: the lock (or tf.connection
// scope) they share and the socket URL their leader dials.
type group struct {
	b     *harness.Browser
	base  string
	side  string
	scope string // the tabs' scope (lock, channel, database)
	feed  string // the endpoint's stream, "" for the demo server's /realtime
	role  string // raw only: "each" gives every tab a socket
	ws    string
	tabs  []*harness.Tab
}

var seq atomic.Int64

// newGroup names a fresh scope and feed for side; wsPath is the endpoint.
func newGroup(b *harness.Browser, base, side, what, wsPath string) *group {
	n := strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatInt(seq.Add(1), 10)
	g := &group{b: b, base: base, side: side, scope: "bench-" + what + "-" + side + "-" + n}
	ws := "ws" + strings.TrimPrefix(base, "http") + wsPath
	if wsPath == prefix+"ws" {
		g.feed = g.scope
		ws += "?" + url.Values{"feed": {g.feed}}.Encode()
	}
	g.ws = ws
	return g
}

func (g *group) pageURL() string {
	q := url.Values{"side": {g.side}, "scope": {g.scope}, "url": {g.ws}}
	if g.role != "" {
		q.Set("role", g.role)
	}
	return g.base + prefix + "page.html?" + q.Encode()
}

// open adds a tab and waits until it has joined: the group's first tab
// (and, with role each, every raw tab) until its socket got the server's
// ready, a later one until it queued for the lock (tf: connection()
// resolved). It returns errUnavailable when the runtime has no
// tf.connection.
func (g *group) open(ctx context.Context) (*harness.Tab, error) {
	t, err := g.b.Open(g.pageURL())
	if err != nil {
		return nil, err
	}
	first := len(g.tabs) == 0
	g.tabs = append(g.tabs, t)
	var st pageState
	err = waitFor(ctx, g.side+" tab ready", readyTimeout, func() (bool, error) {
		if st, err = state(t); err != nil {
			return false, err
		}
		switch {
		case st.Unavailable != "":
			return false, fmt.Errorf("%w: %s", errUnavailable, st.Unavailable)
		case st.Error != "":
			return false, errors.New("page: " + st.Error)
		}
		if !first && !st.Leader {
			return st.Joined, nil // queued for the lock
		}
		return st.Ready, nil
	})
	if err != nil && !errors.Is(err, errUnavailable) {
		err = fmt.Errorf("tab %d of %s: %w (its state: %s, leader %v, version %v)", len(g.tabs), g.scope, err, st.State, st.Leader, st.Version)
	}
	return t, err
}

// waitFor calls cond every pollEvery until it is true, fails (its error
// ends the wait at once, unlike harness.Poll's), or timeout passes.
func waitFor(ctx context.Context, what string, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return errors.New("connbench: timed out after " + timeout.String() + " waiting for " + what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// openN opens n tabs, the first alone until it leads.
func (g *group) openN(ctx context.Context, n int) error {
	for i := 0; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := g.open(ctx); err != nil {
			return err
		}
	}
	return nil
}

// leaderIndex is the index of the one tab that leads.
func (g *group) leaderIndex() (int, error) {
	lead := -1
	for i, t := range g.tabs {
		st, err := state(t)
		if err != nil {
			return 0, err
		}
		if st.Leader {
			if lead >= 0 {
				return 0, errors.New(g.side + ": two tabs lead")
			}
			lead = i
		}
	}
	if lead < 0 {
		return 0, errors.New(g.side + ": no tab leads")
	}
	return lead, nil
}

// appliedAt waits until t applied version and returns when (page clock)
// and whether t led then.
func appliedAt(t *harness.Tab, version uint64) (at float64, leader bool, err error) {
	type applied struct {
		At     float64
		Leader bool
	}
	a, err := harness.Eval[applied](t, `window.__rtb.wait(`+strconv.FormatUint(version, 10)+`, `+
		strconv.Itoa(int(deltaTimeout/time.Millisecond))+`).then((a) => ({At: a.at, Leader: a.leader}))`)
	return a.At, a.Leader, err
}

// closeAll closes the group's tabs.
func (g *group) closeAll() {
	for _, t := range g.tabs {
		t.Close()
	}
	g.tabs = nil
}

// drop closes tab i and removes it from the group.
func (g *group) drop(i int) {
	g.tabs[i].Close()
	g.tabs = append(g.tabs[:i], g.tabs[i+1:]...)
}

// probe makes one mutation from the group's last tab and waits until every
// tab applied its delta: the connection works for all of them, through the
// server.
func (g *group) probe(ctx context.Context) error {
	id := "probe-" + g.scope
	last := g.tabs[len(g.tabs)-1]
	if _, err := harness.Eval[any](last, `window.__rtb.mutateAll(1, "`+id+`"), null`); err != nil {
		return err
	}
	for i, t := range g.tabs {
		if err := waitFor(ctx, "the probe's delta in tab "+strconv.Itoa(i), deltaTimeout, func() (bool, error) {
			return harness.Eval[bool](t, `window.__rtb.hasKey("`+id+`-0")`)
		}); err != nil {
			return err
		}
	}
	return nil
}
