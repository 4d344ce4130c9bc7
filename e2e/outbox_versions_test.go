//go:build e2e

package e2e

import (
	"context"
	"net/url"
	"testing"
	"time"

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
	if err != nil {
		t.Fatalf("%v (last %+v)", err, st)
	}
	return st
}

// A tab of protocol 3 and a tab of protocol 4 of the same outbox (a tab left
// open from before a deploy, and a tab of the new build) share nothing: each
// flushes only its own queue, under its own lock, and neither's pause, status
// or records reach the other.
func TestOutboxProtocolsSeparateQueues(t *testing.T) {
	e := setupOutbox(t)
	q := scope(t)
	old := e.tab(q, "alice", url.Values{"protocol": {"3"}})
	cur := e.tab(q, "alice", url.Values{"protocol": {"4"}})
	if got := eval[string](t, old, `tabfenceNotes.outbox.lockName`); got != "tabfence:outbox-"+q+":v3" {
		t.Fatalf("protocol 3 lock %q", got)
	}
	if got := eval[string](t, cur, `tabfenceNotes.outbox.lockName`); got != "tabfence:outbox-"+q+":v4" {
		t.Fatalf("protocol 4 lock %q", got)
	}
	eval[any](t, old, `tabfenceNotes.outbox.pause()`)
	enqueue(t, old, "p3", 3)
	enqueue(t, cur, "p4", 2)
	curSt := waitVersioned(t, cur, "protocol 4 drained", func(s obVersioned) bool { return s.Acked == 2 && s.Pending == 0 })
	e.waitEffects(2, 10*time.Second)
	if curSt.Paused {
		t.Fatalf("protocol 3's pause reached protocol 4: %+v", curSt)
	}
	if id := eval[string](t, cur, `tabfenceNotes.outbox.id`); curSt.OwnerID != id {
		t.Fatalf("protocol 4's queue flushed by %q, not its tab %q", curSt.OwnerID, id)
	}
	oldSt := waitVersioned(t, old, "protocol 3 waiting", func(s obVersioned) bool { return s.Pending == 3 })
	if oldSt.Acked != 0 || !oldSt.Paused || oldSt.Unsupported != 0 {
		t.Fatalf("protocol 3 status %+v", oldSt)
	}

	eval[any](t, old, `tabfenceNotes.outbox.resume()`)
	oldSt = waitVersioned(t, old, "protocol 3 drained", func(s obVersioned) bool { return s.Acked == 3 && s.Pending == 0 })
	e.waitEffects(5, 10*time.Second)
	if id := eval[string](t, old, `tabfenceNotes.outbox.id`); oldSt.OwnerID != id {
		t.Fatalf("protocol 3's queue flushed by %q, not its tab %q", oldSt.OwnerID, id)
	}
	if s := waitVersioned(t, cur, "protocol 4 unchanged", func(obVersioned) bool { return true }); s.Acked != 2 || s.Pending != 0 {
		t.Fatalf("protocol 4 saw protocol 3's records: %+v", s)
	}
}
