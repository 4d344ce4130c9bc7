//go:build js && wasm

package browser

import "errors"

// The leader removes a settled mutation's row from the pending store, then
// announces rt.settled. A leader that freezes or closes in between (or an
// announcement dropped as stale) leaves a mutation no store lists and no
// tab settles. So the tab that made it, which still has it in memory,
// hands it to every new leader: the leader sends it, the server answers a
// resend with the stored ack (replayed), and that ack settles everywhere.

// markOwn records that this tab made m (its Mutate waits for it).
func (c *Conn) markOwn(id string) {
	c.mu.Lock()
	if c.own == nil {
		c.own = map[string]bool{}
	}
	c.own[id] = true
	c.mu.Unlock()
}

// ownUnsettled is the mutations this tab made that are not settled yet,
// in the order they were made.
func (c *Conn) ownUnsettled() []PendingMutation {
	var out []PendingMutation
	for _, pm := range c.pendingList() {
		c.mu.Lock()
		mine := c.own[pm.ID]
		c.mu.Unlock()
		if mine {
			out = append(out, pm)
		}
	}
	return out
}

// repostOwn hands this tab's unsettled mutations (full content) to a new
// leader on the channel.
func (c *Conn) repostOwn() {
	for _, pm := range c.ownUnsettled() {
		c.post("rt.mutation", encodePending(pm.Mutation.wire(), pm.MadeAt))
	}
}

// errTestDied is what the test hook returns to skip an announcement.
var errTestDied = errors.New("realtime/browser: test hook: leader died before announcing")

// settleHook runs between a settled mutation's delete and its announcement
// (tests only: it may stop the announcement, as a leader that dies there).
func (c *Conn) settleHook(id string) error {
	c.mu.Lock()
	h := c.testSettled
	c.mu.Unlock()
	if h != nil && h(id) {
		return errTestDied
	}
	return nil
}

// takeOwn hands this tab's own unsettled mutations to its new leader: the
// pending store may have lost them (see above).
func (lr *leaderRun) takeOwn() {
	for _, pm := range lr.c.ownUnsettled() {
		lr.mutate(pm.Mutation.wire())
	}
}
