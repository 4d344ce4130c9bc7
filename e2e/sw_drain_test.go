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

// Edits made offline, then every tab of the origin closed: the sync event
// (dispatched over CDP, as the browser does once online) sends each
// mutation once from the worker, which reports done; a tab opened later
// finds nothing left to send.
func TestSWDrainsAfterEveryTabClosed(t *testing.T) {
	chromiumOnly(t, "dispatches sync to the Service Worker and reads its reports (CDP ServiceWorker domain)", func(t *testing.T, k harness.Kind) {
		e := setupSW(t, k)
		q := scope(t)
		tab := e.swTab(q, "alice", url.Values{"bgsync": {"0"}})
		e.active(1)
		offline(t, tab, true)
		const n = 20
		enqueue(t, tab, "a", n)
		tag := syncTag(t, tab)
		tab.Close()
		require.Equal(t, 0, e.effects(), "sent while offline")

		start := time.Now()
		e.dispatch(tag, false)
		e.waitEffects(n, swTimeout)
		took := time.Since(start)
		rep := e.waitReport(tag, 1)
		require.Equal(t, "done", rep.Reason, "report %+v", rep)
		require.False(t, rep.Retry, "report %+v", rep)
		require.Equal(t, n, rep.Acked, "report %+v", rep)
		require.Equal(t, 0, rep.Remaining, "report %+v", rep)
		e.waitIdle()
		e.requireOncePerKey(n)
		_, max := e.ctl.keys()
		require.Equal(t, 1, max, "a key was sent more than once")
		e.ctl.mu.Lock()
		asAlice := e.ctl.byUser["alice"]
		e.ctl.mu.Unlock()
		require.Equal(t, n, asAlice, "requests with the headers hook's X-Demo-User: alice")

		later := e.tab(q, "alice", url.Values{"bgsync": {"0"}})
		st := waitStatus(t, later, "the queue settled", 10*time.Second, func(s obStatus) bool { return s.Sending == 0 })
		require.Equal(t, 0, st.Pending+st.Failed, "a tab opened later: %+v", st)
		e.waitIdle()
		require.Equal(t, n, e.effects(), "effects after a tab opened again")
		t.Logf("sync event -> %d mutations acked from the worker in %v (report %+v)", n, took, rep)
	})
}

// The sync event fires while two tabs flush: the worker waits for the flush
// lock the flushing tab holds; that tab goes offline mid-flush, the worker
// takes over and finishes under a higher fencing token. Every mutation
// changes the server once, and one owner at a time: the server never
// applies a request under a fencing token lower than one it already applied.
func TestSWSyncBesideFlushingTabs(t *testing.T) {
	chromiumOnly(t, "dispatches sync to the Service Worker and reads its reports (CDP ServiceWorker domain)", func(t *testing.T, k harness.Kind) {
		e := setupSW(t, k)
		q := scope(t)
		tabs := []*harness.Tab{e.swTab(q, "alice", url.Values{"bgsync": {"0"}}), e.swTab(q, "alice", url.Values{"bgsync": {"0"}})}
		e.active(1)
		for _, tab := range tabs {
			offline(t, tab, true)
		}
		const n = 80
		enqueue(t, tabs[0], "b0", n/2)
		enqueue(t, tabs[1], "b1", n/2)
		tag := syncTag(t, tabs[0])
		// The tab's first send is held after its commit: the tab is still
		// flushing (its batch unfinished) when the worker queues for the lock.
		committed, release := make(chan struct{}), make(chan struct{})
		released := false
		defer func() {
			if !released {
				close(release)
			}
		}()
		e.ctl.set(func(c *noteCtl) { c.holdNext, c.committed, c.release = true, committed, release })
		for _, tab := range tabs {
			offline(t, tab, false)
		}
		select {
		case <-committed:
		case <-time.After(swTimeout):
			t.Fatal("no request of a tab reached the server")
		}
		owner := leaderOf(t, tabs)
		e.dispatch(tag, false)
		require.NoError(t, harness.Poll(context.Background(), "the worker waiting for the flush lock", swTimeout, 10*time.Millisecond, func() (bool, error) {
			l, err := tabs[owner].Locks(tag)
			return l.Held == 1 && l.Pending >= 1, err
		}))
		require.Less(t, e.effects(), n, "the tab finished before the worker asked for the lock")
		tabTok := uint64(eval[float64](t, tabs[owner], `tabfenceNotes.outbox.status().then(s => s.fenceToken)`))
		offline(t, tabs[owner], true) // its flush stops at the next send; the lock goes to the worker
		released = true
		close(release)
		e.waitEffects(n, swTimeout)
		rep := e.waitReport(tag, 1)
		require.Equal(t, "done", rep.Reason, "report %+v", rep)
		require.Positive(t, rep.Acked, "the worker sent nothing: %+v", rep)
		offline(t, tabs[owner], false)
		for _, tab := range tabs {
			waitStatus(t, tab, "all acked", 10*time.Second, func(s obStatus) bool { return s.Acked == n && s.Pending+s.Sending+s.Failed == 0 })
			waitJS(t, tab, "its flushes to end", flushesEndedJS+`(tabfenceNotes.events)`)
		}
		e.waitIdle()
		e.requireOncePerKey(n)
		byTok := e.requireFencesNeverBack()
		toks := tokens(byTok)
		require.GreaterOrEqual(t, len(toks), 2, "effects by fencing token %v: one owner did everything", byTok)
		require.Equal(t, tabTok, toks[0], "effects by fencing token %v: the first owner was not the tab (token %d)", byTok, tabTok)
		t.Logf("worker report %+v; effects by fencing token %v (the tab's %d)", rep, byTok, tabTok)
	})
}

// The worker is stopped (CDP stopWorker) in the middle of its flush, after
// the server committed a mutation and before the answer came back: the
// browser releases its lock, the next sync event starts a fresh worker,
// which resends the lost answer's key (the server replays it) and finishes
// the queue: exactly once.
func TestSWStoppedMidFlush(t *testing.T) {
	chromiumOnly(t, "stops the Service Worker mid-flush: ServiceWorker.stopWorker is CDP-only", func(t *testing.T, k harness.Kind) {
		stoppedMidFlush(t, k, false)
	})
}

// The same, with a tab opened after the stop as the next trigger.
func TestSWStoppedMidFlushTabFinishes(t *testing.T) {
	chromiumOnly(t, "stops the Service Worker mid-flush: ServiceWorker.stopWorker is CDP-only", func(t *testing.T, k harness.Kind) {
		stoppedMidFlush(t, k, true)
	})
}

func stoppedMidFlush(t *testing.T, k harness.Kind, byTab bool) {
	e := setupSW(t, k)
	q := scope(t)
	tab := e.swTab(q, "alice", url.Values{"bgsync": {"0"}})
	e.active(1)
	offline(t, tab, true)
	const n = 20
	enqueueIn(t, tab, "c", n, "list") // one entity: sent one after another
	tag := syncTag(t, tab)
	tab.Close()

	committed, release := make(chan struct{}), make(chan struct{})
	e.ctl.set(func(c *noteCtl) { c.holdNext, c.committed, c.release = true, committed, release })
	e.dispatch(tag, false)
	select {
	case <-committed:
	case <-time.After(swTimeout):
		close(release)
		t.Fatalf("no request of the worker reached the server (worker errors %v)", e.sw.Errors())
	}
	require.Equal(t, 1, e.effects(), "effects before the stop")
	e.detach()
	v, ok := harness.Active(e.sw.Versions(e.scope))
	require.True(t, ok, "no active worker")
	stopped := time.Now()
	require.NoError(t, e.sw.Stop(context.Background(), v))
	close(release) // the worker is gone: nobody reads this answer
	e.waitIdle()
	require.Equal(t, 1, e.effects(), "effects after the stop")

	var later *harness.Tab
	if byTab {
		later = e.tab(q, "alice", url.Values{"bgsync": {"0"}})
	} else {
		e.dispatch(tag, false)
	}
	e.waitEffects(n, swTimeout)
	took := time.Since(stopped)
	if byTab {
		waitStatus(t, later, "all acked", 10*time.Second, func(s obStatus) bool { return s.Acked == n && s.Pending+s.Sending+s.Failed == 0 })
		waitJS(t, later, "its flushes to end", flushesEndedJS+`(tabfenceNotes.events)`)
	} else {
		rep := e.waitReport(tag, 1) // the new worker's first
		require.Equal(t, "done", rep.Reason, "report %+v", rep)
		require.Equal(t, 0, rep.Remaining, "report %+v", rep)
	}
	e.waitIdle()
	e.requireOncePerKey(n)
	_, max := e.ctl.keys()
	require.GreaterOrEqual(t, max, 2, "the lost answer's key was never resent")
	e.requireFencesNeverBack()
	t.Logf("worker stopped mid-flush: the next trigger (a tab: %v) finished the queue %v after the stop", byTab, took)
}
