package browser

import (
	"sync"
	"testing"

	"github.com/tabfence/tabfence/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// More deltas than a loading follower holds arrive during its load: the
// load's result is a gap, so it loads again, and ends at what the replica
// holds then, not at the stale version of the first load.
func TestReloadAgainAfterOverflow(t *testing.T) {
	var mu sync.Mutex
	var fol realtime.Follower
	fol.Loaded(5)
	stored := []uint64{5, 5 + realtime.MaxHeld + 1}
	loads := 0
	v, apply := reloadFollower(&mu, &fol, func() (uint64, error) {
		loads++
		if loads == 1 {
			mu.Lock()
			for i := uint64(6); i <= 6+realtime.MaxHeld; i++ { // announced meanwhile
				fol.Offer(rt.Delta{Version: i, Prev: i - 1})
			}
			mu.Unlock()
		}
		return stored[loads-1], nil
	})
	if loads != 2 || v != stored[1] || len(apply) != 0 {
		t.Fatalf("loads %d, version %d (want %d), %d to apply", loads, v, stored[1], len(apply))
	}
	if fol.Version() != stored[1] {
		t.Fatalf("follower at %d", fol.Version())
	}
}

// Held deltas that skip past the loaded version: load again.
func TestReloadAgainAfterHeldGap(t *testing.T) {
	var mu sync.Mutex
	var fol realtime.Follower
	loads := 0
	v, apply := reloadFollower(&mu, &fol, func() (uint64, error) {
		loads++
		if loads == 1 {
			mu.Lock()
			fol.Offer(rt.Delta{Version: 9, Prev: 8})
			mu.Unlock()
			return 3, nil
		}
		return 8, nil
	})
	if loads != 2 || v != 8 || len(apply) != 0 {
		t.Fatalf("loads %d, version %d, %d to apply", loads, v, len(apply))
	}
}

// A reload takes the stored version as is, even lower (a server reset),
// and a hostile stream cannot make it load for good.
func TestReloadTakesStoredVersionAndIsBounded(t *testing.T) {
	var mu sync.Mutex
	var fol realtime.Follower
	fol.Loaded(57)
	v, _ := reloadFollower(&mu, &fol, func() (uint64, error) { return 0, nil })
	if v != 0 {
		t.Fatalf("version %d after a reset to 0", v)
	}
	loads := 0
	reloadFollower(&mu, &fol, func() (uint64, error) {
		loads++
		mu.Lock()
		fol.Offer(rt.Delta{Version: 100, Prev: 99})
		mu.Unlock()
		return 1, nil
	})
	if loads != maxReloads {
		t.Fatalf("%d loads, want %d", loads, maxReloads)
	}
}
