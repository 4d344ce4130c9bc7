package realtime

import rt "github.com/tabfence/tabfence/wire/realtime"

// Verdict is what a follower does with a delta it was told about.
type Verdict int

const (
	// Apply: the delta continues the replica's version; apply it in memory.
	Apply Verdict = iota + 1
	// Duplicate: the replica already holds it; ignore it.
	Duplicate
	// Gap: the delta starts past the replica's version (a message was
	// missed). Reload from the stored replica, which holds at least what any
	// announced delta said (the leader writes, then announces), and call
	// Loaded with the version read.
	Gap
	// Held: a load is in progress; Loaded returns it to apply in order.
	Held
)

// MaxHeld bounds the deltas a loading follower holds; past it the load's
// result is treated as a gap and reloaded.
const MaxHeld = 1024

// Follower is the version rule of a tab that does not hold the socket. It
// never repairs a gap itself: it reloads from storage. A starting tab
// subscribes before it loads, holds what arrives during the load
// (BeginLoad), and replays it after (Loaded). The zero value is a follower
// at version 0 that is not loading.
type Follower struct {
	version  uint64
	loading  bool
	held     []rt.Delta
	overflow bool
}

// Version is the replica version the follower holds.
func (f *Follower) Version() uint64 { return f.version }

// BeginLoad starts a reload from storage: deltas are held until Loaded.
func (f *Follower) BeginLoad() { f.loading, f.held, f.overflow = true, nil, false }

// Offer judges d against the replica's version and, for Apply, advances it.
func (f *Follower) Offer(d rt.Delta) Verdict {
	if f.loading {
		if len(f.held) >= MaxHeld {
			f.overflow = true
		} else {
			f.held = append(f.held, d)
		}
		return Held
	}
	switch {
	case d.Version <= f.version:
		return Duplicate
	case d.Prev == f.version:
		f.version = d.Version
		return Apply
	}
	return Gap
}

// Loaded ends a load that read the replica at version, and returns the held
// deltas to apply, in order, past what the load already holds. gap is true
// when the held deltas do not continue the loaded version (or too many
// arrived): reload again (BeginLoad).
func (f *Follower) Loaded(version uint64) (apply []rt.Delta, gap bool) {
	f.loading, f.version = false, version
	held, overflow := f.held, f.overflow
	f.held, f.overflow = nil, false
	if overflow {
		return nil, true
	}
	for _, d := range held {
		switch f.Offer(d) {
		case Apply:
			apply = append(apply, d)
		case Gap:
			return apply, true
		}
	}
	return apply, false
}
