package swbench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/tabfence/tabfence/e2e/harness"
)

// open opens the demo page of the bench's queue and waits for its outbox.
// The page has no Background Sync (harness.HideSyncManager), so its
// outbox registers no sync tag: headless Chromium fires a registered tag's
// event by itself whenever the browser is online (a tab's network
// emulation does not change that), and the bench's events must be the ones
// it dispatches.
func (bn *bench) open(ctx context.Context) (*harness.Tab, error) {
	tab, err := bn.b.NewTab()
	if err != nil {
		return nil, err
	}
	if err := tab.HideSyncManager(); err != nil {
		tab.Close()
		return nil, err
	}
	if err := tab.Navigate(bn.url + "/?" + bn.page.Encode()); err != nil {
		tab.Close()
		return nil, err
	}
	err = harness.Poll(ctx, "outbox ready", 30*time.Second, 10*time.Millisecond, func() (bool, error) {
		return harness.Eval[bool](tab, `!!(window.tabfenceNotes && (window.tabfenceNotes.ready || window.tabfenceNotes.error && Promise.reject(window.tabfenceNotes.error)))`)
	})
	if err != nil {
		tab.Close()
		return nil, err
	}
	return tab, nil
}

// queueState is what a tab sees of the shared queue.
type queueState struct {
	Pending, Sending, Failed int
	Held, Waiting            int // the queue's Web Lock: held, requested
}

func (bn *bench) state(tab *harness.Tab) (queueState, error) {
	name, _ := json.Marshal(bn.tag)
	return harness.Eval[queueState](tab, `Promise.all([tabfenceNotes.outbox.status(), navigator.locks.query()]).then(([s, q]) => ({
		Pending: s.pending, Sending: s.sending, Failed: s.failed,
		Held: q.held.filter(l => l.name === `+string(name)+`).length, Waiting: q.pending.filter(l => l.name === `+string(name)+`).length }))`)
}

// idle waits until nothing is queued and nobody holds the queue's lock:
// the previous flush (a tab's or the worker's) has ended.
func (bn *bench) idle(ctx context.Context, tab *harness.Tab) error {
	var last queueState
	return harness.Poll(ctx, "an idle queue", flushTimeout, 5*time.Millisecond, func() (bool, error) {
		s, err := bn.state(tab)
		last = s
		if err != nil {
			return false, err
		}
		if s.Failed > 0 {
			return false, fmt.Errorf("records failed: %+v", last)
		}
		return s.Pending+s.Sending == 0 && s.Held+s.Waiting == 0, nil
	})
}

// enqueue adds n mutations in Entities entities (ten enqueues at a time)
// and waits until the queue shows them pending.
func (bn *bench) enqueue(ctx context.Context, tab *harness.Tab, n int) error {
	if _, err := harness.Eval[bool](tab, `(async (n, entities) => {
		const ob = tabfenceNotes.outbox, run = Math.random().toString(36).slice(2);
		for (let i = 0; i < n; i += 10) {
			const ps = [];
			for (let j = i; j < Math.min(i + 10, n); j++) ps.push(ob.enqueue({operationType: "put-note", entityType: "note", entityId: "s" + (j % entities), payload: {id: run + "-" + j, text: "x"}}));
			await Promise.all(ps);
		}
		return true; })(`+strconv.Itoa(n)+`, `+strconv.Itoa(Entities)+`)`); err != nil {
		return err
	}
	return harness.Poll(ctx, "the mutations queued", 30*time.Second, 5*time.Millisecond, func() (bool, error) {
		s, err := bn.state(tab)
		return err == nil && s.Pending == n, err
	})
}

// fillOffline queues n mutations from a tab whose network is cut (its
// flushes fail offline, uncharged) and closes it once the previous flush
// has ended and nobody holds the lock: no tab of the origin stays open.
func (bn *bench) fillOffline(ctx context.Context, n int) error {
	tab, err := bn.open(ctx)
	if err != nil {
		return err
	}
	defer tab.Close()
	if err := bn.idle(ctx, tab); err != nil {
		return err
	}
	if err := offline(tab, true); err != nil {
		return err
	}
	if err := bn.enqueue(ctx, tab, n); err != nil {
		return err
	}
	return harness.Poll(ctx, "the offline tab off the lock", 10*time.Second, 5*time.Millisecond, func() (bool, error) {
		s, err := bn.state(tab)
		return err == nil && s.Held+s.Waiting == 0, err
	})
}

// offline cuts the tab's network (fetch fails, navigator.onLine is false);
// it needs the Network domain a bare tab has off.
func offline(tab *harness.Tab, off bool) error { return tab.SetOffline(off) }
