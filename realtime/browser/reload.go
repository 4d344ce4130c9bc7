package browser

import (
	"sync"

	"github.com/tabfence/tabfence/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

// maxReloads bounds the loads of one reload: each load after a gap reads a
// replica that holds at least the deltas announced meanwhile (the leader
// writes, then announces), so a second load normally ends it; the bound
// keeps a hostile stream of announcements from looping for good.
const maxReloads = 4

// reloadFollower runs the follower's reload rule: hold the deltas that
// arrive while the stored version is read, take that version as is (a
// server reset may have lowered it), apply the held deltas that continue
// it, and load again when they do not (a gap, or too many held). load
// reads the stored version; on an error the follower keeps its version.
// mu guards fol. It returns the version reached and the deltas to apply.
func reloadFollower(mu *sync.Mutex, fol *realtime.Follower, load func() (uint64, error)) (uint64, []rt.Delta) {
	for i := 0; ; i++ {
		mu.Lock()
		fol.BeginLoad()
		mu.Unlock()
		stored, err := load()
		mu.Lock()
		v := fol.Version()
		if err == nil {
			v = stored
		}
		apply, gap := fol.Loaded(v)
		v = fol.Version()
		mu.Unlock()
		// After a gap the next load rereads what those deltas carried.
		if !gap || i == maxReloads-1 {
			return v, apply
		}
	}
}
