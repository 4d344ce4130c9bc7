//go:build e2e

package e2e

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/e2e/harness"
)

// obVersioned is the part of the outbox status these tests read.
type obVersioned struct {
	Pending, Acked, Unsupported int
	Paused                      bool
	OwnerID                     string `json:"ownerId"`
}

func waitVersioned(t *testing.T, tab *harness.Tab, what string, cond func(obVersioned) bool) obVersioned {
	t.Helper()
	var st obVersioned
	err := harness.Poll(context.Background(), what, 15*time.Second, 30*time.Millisecond, func() (bool, error) {
		v, err := harness.Eval[obVersioned](tab, `tabfenceNotes.outbox.status()`)
		st = v
		return err == nil && cond(v), err
	})
	require.NoError(t, err, "%v (last %+v)", err, st)
	return st
}

// A tab of protocol 3 and a tab of protocol 4 of the same outbox (a tab left
// open from before a deploy, and a tab of the new build) share nothing: each
// flushes only its own queue, under its own lock, and neither's pause, status
// or records reach the other.
func TestOutboxProtocolsSeparateQueues(t *testing.T) {
	each(t, func(t *testing.T, k harness.Kind) {
		e := setupOutbox(t, k)
		q := scope(t)
		old := e.tab(q, "alice", url.Values{"protocol": {"3"}})
		cur := e.tab(q, "alice", url.Values{"protocol": {"4"}})
		require.Equal(t, "tabfence:outbox-"+q+":v3", eval[string](t, old, `tabfenceNotes.outbox.lockName`), "protocol 3 lock")
		require.Equal(t, "tabfence:outbox-"+q+":v4", eval[string](t, cur, `tabfenceNotes.outbox.lockName`), "protocol 4 lock")
		eval[any](t, old, `tabfenceNotes.outbox.pause()`)
		enqueue(t, old, "p3", 3)
		enqueue(t, cur, "p4", 2)
		curSt := waitVersioned(t, cur, "protocol 4 drained", func(s obVersioned) bool { return s.Acked == 2 && s.Pending == 0 })
		e.waitEffects(2, 10*time.Second)
		require.False(t, curSt.Paused, "protocol 3's pause reached protocol 4: %+v", curSt)
		id := eval[string](t, cur, `tabfenceNotes.outbox.id`)
		require.Equal(t, id, curSt.OwnerID, "protocol 4's queue flushed by %q, not its tab %q", curSt.OwnerID, id)
		oldSt := waitVersioned(t, old, "protocol 3 waiting", func(s obVersioned) bool { return s.Pending == 3 })
		require.Equal(t, 0, oldSt.Acked, "protocol 3 status %+v", oldSt)
		require.True(t, oldSt.Paused, "protocol 3 status %+v", oldSt)
		require.Equal(t, 0, oldSt.Unsupported, "protocol 3 status %+v", oldSt)

		eval[any](t, old, `tabfenceNotes.outbox.resume()`)
		oldSt = waitVersioned(t, old, "protocol 3 drained", func(s obVersioned) bool { return s.Acked == 3 && s.Pending == 0 })
		e.waitEffects(5, 10*time.Second)
		id = eval[string](t, old, `tabfenceNotes.outbox.id`)
		require.Equal(t, id, oldSt.OwnerID, "protocol 3's queue flushed by %q, not its tab %q", oldSt.OwnerID, id)
		s := waitVersioned(t, cur, "protocol 4 unchanged", func(obVersioned) bool { return true })
		require.Equal(t, 2, s.Acked, "protocol 4 saw protocol 3's records")
		require.Equal(t, 0, s.Pending, "protocol 4 saw protocol 3's records")
	})
}
