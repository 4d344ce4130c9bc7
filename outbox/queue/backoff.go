package queue

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Backoff is exponential backoff with FULL jitter (a uniform delay in
// [0, min(Cap, Base*2^(attempt-1))]): after a reconnect, tabs and devices
// spread out instead of retrying in lock step. Retry-After is a floor.
// The random source is injected so tests and the simulation are deterministic.
type Backoff struct {
	Base time.Duration // first ceiling; default 1s
	Cap  time.Duration // largest ceiling; default 5m
	Rand *rand.Rand    // default: a PCG seeded from the wall clock

	mu sync.Mutex
}

func (b *Backoff) bounds() (base, max time.Duration) {
	base, max = b.Base, b.Cap
	if base <= 0 {
		base = time.Second
	}
	if max <= 0 {
		max = 5 * time.Minute
	}
	if max < base {
		max = base
	}
	return base, max
}

// Ceiling is the largest delay for the given attempt (1-based).
func (b *Backoff) Ceiling(attempt int) time.Duration {
	base, max := b.bounds()
	if attempt < 1 {
		attempt = 1
	}
	d := base
	for i := 1; i < attempt; i++ {
		if d >= max/2 {
			return max
		}
		d *= 2
	}
	if d > max {
		d = max
	}
	return d
}

// Delay draws the wait before the next try after the attempt-th failure.
// retryAfter, when hasRetryAfter, is honoured as a floor (it may exceed Cap:
// the server knows best, and wire.ParseRetryAfter already caps it).
func (b *Backoff) Delay(attempt int, retryAfter time.Duration, hasRetryAfter bool) time.Duration {
	ceil := b.Ceiling(attempt)
	b.mu.Lock()
	if b.Rand == nil {
		n := uint64(time.Now().UnixNano())
		b.Rand = rand.New(rand.NewPCG(n, n^0x9e3779b97f4a7c15))
	}
	d := time.Duration(b.Rand.Int64N(int64(ceil) + 1))
	b.mu.Unlock()
	if hasRetryAfter && d < retryAfter {
		d = retryAfter
	}
	return d
}
