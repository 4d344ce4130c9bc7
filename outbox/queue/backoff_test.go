package queue

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tabfence/tabfence/wire"
)

func TestBackoffCeilingAndCap(t *testing.T) {
	b := &Backoff{Base: time.Second, Cap: 30 * time.Second}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range want {
		require.Equal(t, w, b.Ceiling(i+1))
	}
	require.Equal(t, 30*time.Second, b.Ceiling(1000)) // no overflow
}

func TestBackoffFullJitterRange(t *testing.T) {
	b := &Backoff{Base: time.Second, Cap: time.Minute, Rand: rand.New(rand.NewPCG(7, 7))}
	var lowHalf, highHalf int
	for i := 0; i < 2000; i++ {
		d := b.Delay(4, 0, false)
		require.True(t, d >= 0 && d <= 8*time.Second, d)
		if d < 4*time.Second {
			lowHalf++
		} else {
			highHalf++
		}
	}
	// full jitter: uniform over [0, ceiling], both halves well used
	require.True(t, lowHalf > 800 && highHalf > 800, lowHalf, highHalf)
}

func TestBackoffDeterministicWithSeed(t *testing.T) {
	a := &Backoff{Rand: rand.New(rand.NewPCG(1, 1))}
	b := &Backoff{Rand: rand.New(rand.NewPCG(1, 1))}
	for i := 1; i < 20; i++ {
		require.Equal(t, a.Delay(i, 0, false), b.Delay(i, 0, false))
	}
}

func TestBackoffRetryAfterIsAFloor(t *testing.T) {
	b := &Backoff{Base: time.Second, Cap: 10 * time.Second, Rand: rand.New(rand.NewPCG(3, 3))}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", now.Add(2 * time.Minute).Format("Mon, 02 Jan 2006 15:04:05 GMT")} {
		ra, ok := wire.ParseRetryAfter(v, now)
		require.True(t, ok)
		for i := 0; i < 100; i++ {
			require.Equal(t, 2*time.Minute, b.Delay(1, ra, ok)) // above the cap: the server knows best
		}
	}
	// a small Retry-After only raises draws below it
	for i := 0; i < 100; i++ {
		require.True(t, b.Delay(5, 3*time.Second, true) >= 3*time.Second)
	}
}
