package locks

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// beaconHooks are what a beacon reports, from JavaScript events: heartbeats
// heard (valid or not) and the page's visibility and lifecycle. They never
// block. (*watch implements them.)
type beaconHooks interface {
	heard(token uint64)
	malformed()
	visible(bool)
	frozen(bool)
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
	b, err := w.e.be.beacon(HeartbeatChannel(w.e.name), w)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.b = b
	w.mu.Unlock()
	go w.run()
	return nil
}

// poke wakes the loop to recompute its deadline. It never blocks.
func (w *watch) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watch) heard(tok uint64) {
	w.mu.Lock()
	w.wd.Heard(time.Now(), tok)
	w.mu.Unlock()
	w.poke()
}

func (w *watch) malformed() {
	w.mu.Lock()
	w.wd.Malformed()
	w.mu.Unlock()
}

func (w *watch) visible(v bool) {
	w.mu.Lock()
	w.wd.SetVisible(time.Now(), v)
	w.mu.Unlock()
	w.poke()
}

func (w *watch) frozen(f bool) {
	w.mu.Lock()
	w.wd.SetFrozen(time.Now(), f)
	w.mu.Unlock()
	w.poke()
}

func (w *watch) follow() {
	w.mu.Lock()
	w.wd.Follow(time.Now())
	w.mu.Unlock()
	w.poke()
}

func (w *watch) stop() {
	w.mu.Lock()
	w.wd.Stop()
	w.mu.Unlock()
	w.poke()
}

func (w *watch) stats() WatchStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wd.Stats()
}

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
