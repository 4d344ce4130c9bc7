package realtime_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/realtime"
	rt "github.com/tabfence/tabfence/wire/realtime"
)

func d(prev uint64) rt.Delta { return rt.Delta{Version: prev + 1, Prev: prev} }

func TestFollowerAppliesInOrderAndReloadsOnGap(t *testing.T) {
	var f realtime.Follower
	require.Equal(t, realtime.Apply, f.Offer(d(0)))
	require.Equal(t, realtime.Apply, f.Offer(d(1)))
	require.Equal(t, realtime.Duplicate, f.Offer(d(0)))
	require.Equal(t, realtime.Gap, f.Offer(d(5)), "a missed delta is not repaired: reload")
	require.Equal(t, uint64(2), f.Version(), "a gap applies nothing")
}

// A starting tab subscribes, then loads: what arrives meanwhile is held
// and replayed past the loaded version.
func TestFollowerHoldsDuringLoadAndReplays(t *testing.T) {
	var f realtime.Follower
	f.BeginLoad()
	for v := uint64(3); v < 7; v++ {
		require.Equal(t, realtime.Held, f.Offer(d(v)))
	}
	apply, gap := f.Loaded(4) // the load already holds 4
	require.False(t, gap)
	require.Equal(t, []rt.Delta{d(4), d(5), d(6)}, apply)
	require.Equal(t, uint64(7), f.Version())

	f.BeginLoad()
	f.Offer(d(9))
	_, gap = f.Loaded(7)
	require.True(t, gap, "held deltas that do not continue the load: reload again")

	f.BeginLoad()
	for i := 0; i <= realtime.MaxHeld; i++ {
		f.Offer(d(uint64(10 + i)))
	}
	_, gap = f.Loaded(10)
	require.True(t, gap, "more than MaxHeld held: reload rather than hold without bound")
}
