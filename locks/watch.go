package locks

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// beaconHooks are what a beacon reports, from JavaScript events: heartbeats
// heard (valid or not) and the page's visibility and lifecycle.
type beaconHooks struct {
	heard     func(token uint64)
	malformed func()
	visible   func(bool)
	frozen    func(bool)
}

// beacon is the browser half of the watchdog (watchdog_js.go): the
// heartbeat channel and the page's state. open reports the page's current
// visibility and lifecycle through the hooks before it returns.
type beacon interface {
	// beat posts heartbeats carrying token — one at once, then one every
	// HeartbeatEvery from timer tasks — until ctx ends.
	beat(ctx context.Context, token uint64)
	close()
}

// watch runs an election's Watchdog: it feeds it the beacon's news and the
// election's phases, and steals when it says so.
type watch struct {
	e    *Election
	mu   sync.Mutex
	wd   *Watchdog
	b    beacon
	wake chan struct{}
}

func newWatch(e *Election, stallAfter time.Duration) *watch {
	return &watch{e: e, wd: NewWatchdog(stallAfter, rand.Int64N), wake: make(chan struct{}, 1)}
}

// open connects the beacon; the watch loop runs until the election closes.
func (w *watch) open() error {
	h := beaconHooks{
		heard:     func(tok uint64) { w.update(func(now time.Time) { w.wd.Heard(now, tok) }) },
		malformed: func() { w.update(func(time.Time) { w.wd.Malformed() }) },
		visible:   func(v bool) { w.update(func(now time.Time) { w.wd.SetVisible(now, v) }) },
		frozen:    func(f bool) { w.update(func(now time.Time) { w.wd.SetFrozen(now, f) }) },
	}
	b, err := w.e.be.beacon(HeartbeatChannel(w.e.name), h)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.b = b
	w.mu.Unlock()
	go w.run()
	return nil
}

// update changes the watchdog under the lock and wakes the loop. It never
// blocks: hooks run on the JavaScript event loop.
func (w *watch) update(f func(now time.Time)) {
	w.mu.Lock()
	f(time.Now())
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watch) follow()                   { w.update(w.wd.Follow) }
func (w *watch) stop()                     { w.update(func(time.Time) { w.wd.Stop() }) }
func (w *watch) stats() WatchStats         { w.mu.Lock(); defer w.mu.Unlock(); return w.wd.Stats() }
func (w *watch) stallAfter() time.Duration { return w.wd.StallAfter() }

// lead starts this leadership's heartbeats; they stop when l.Ctx ends.
func (w *watch) lead(l *Leadership) {
	w.mu.Lock()
	w.wd.Stop()
	w.wd.Led(l.Token)
	b := w.b
	w.mu.Unlock()
	if b != nil {
		b.beat(l.Ctx, l.Token)
	}
}

// run sleeps until the watchdog's deadline and steals when it passes.
func (w *watch) run() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	defer func() {
		w.mu.Lock()
		b := w.b
		w.b = nil
		w.mu.Unlock()
		if b != nil {
			b.close()
		}
	}()
	for {
		w.mu.Lock()
		d := w.wd.Deadline()
		w.mu.Unlock()
		t.Stop()
		if !d.IsZero() {
			t.Reset(max(time.Until(d), 0))
		}
		select {
		case <-w.e.ctx.Done():
			return
		case <-w.wake:
			continue
		case <-t.C:
		}
		w.mu.Lock()
		steal := w.wd.Tick(time.Now())
		w.mu.Unlock()
		if steal {
			// Steal returns once this election leads or the steal
			// failed (the election then rejoins the queue, and the
			// watchdog follows again); it must not block the loop.
			go func() { _, _ = w.e.Steal(w.e.ctx) }()
		}
	}
}
