//go:build !(js && wasm)

package locks

import (
	"context"
	"sync"
	"time"
)

// bus is an in-memory model of the heartbeat BroadcastChannels: a beat
// reaches every other beacon of the same name, as postMessage does. A
// beacon can be paused (its page frozen: no timers, so no heartbeats) and
// made hidden.
var bus = &fakeBus{subs: map[string][]*fakeBeacon{}}

type fakeBus struct {
	mu   sync.Mutex
	subs map[string][]*fakeBeacon
}

type fakeBeacon struct {
	bus  *fakeBus
	name string
	h    beaconHooks

	mu     sync.Mutex
	paused bool
	closed bool
}

func (f *fakeBus) open(name string, h beaconHooks) (beacon, error) {
	b := &fakeBeacon{bus: f, name: name, h: h}
	f.mu.Lock()
	f.subs[name] = append(f.subs[name], b)
	f.mu.Unlock()
	h.visible(true)
	return b, nil
}

// beacons returns the beacons opened on channel name, in opening order.
func (f *fakeBus) beacons(name string) []*fakeBeacon {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*fakeBeacon(nil), f.subs[name]...)
}

func (f *fakeBus) send(from *fakeBeacon, token uint64) {
	f.mu.Lock()
	subs := append([]*fakeBeacon(nil), f.subs[from.name]...)
	f.mu.Unlock()
	for _, b := range subs {
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if b != from && !closed {
			b.h.heard(token)
		}
	}
}

// freeze stops (or restarts) this beacon's heartbeats, as freezing its page would.
func (b *fakeBeacon) freeze(paused bool) {
	b.mu.Lock()
	b.paused = paused
	b.mu.Unlock()
}

func (b *fakeBeacon) beat(ctx context.Context, token uint64) {
	go func() {
		t := time.NewTicker(HeartbeatEvery)
		defer t.Stop()
		for {
			b.mu.Lock()
			quiet := b.paused || b.closed
			b.mu.Unlock()
			if !quiet {
				b.bus.send(b, token)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

func (b *fakeBeacon) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
}
