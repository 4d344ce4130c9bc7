//go:build js && wasm

package main

import (
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAllocateRateVersusRawJS logs token allocations and fenced applies per
// second beside the same transactions in raw JavaScript in the same page,
// interleaved (figures only; the bench target is 0.8x raw). With the
// loader's idb hooks installed, as the bench runs them, unless
// TABFENCE_PERF_NOHOOKS is set (Go's own path).
func TestAllocateRateVersusRawJS(t *testing.T) {
	if os.Getenv("TABFENCE_PERF") == "" {
		t.Skip("set TABFENCE_PERF=1")
	}
	ctx := context.Background()
	if os.Getenv("TABFENCE_PERF_NOHOOKS") == "" {
		require.NoError(t, useHooks(ctx))
	}
	n := 600
	if s := os.Getenv("TABFENCE_PERF_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	var prevGo, prevJS time.Duration
	benchTrace = func(r int, goT, jsT time.Duration) {
		t.Logf("  round %d: Go %v/op, JS %v/op", r, (goT-prevGo)/time.Duration(n/benchRounds), (jsT-prevJS)/time.Duration(n/benchRounds))
		prevGo, prevJS = goT, jsT
	}
	defer func() { benchTrace = nil }()
	a, err := benchAllocate(ctx, n)
	require.NoError(t, err)
	t.Logf("allocate: Go %.0f/s, raw JS %.0f/s (%.2fx; median %.2f)", a.GoPerSec, a.JSPerSec, a.GoPerSec/a.JSPerSec, med(a.Ratios))
	prevGo, prevJS = 0, 0
	p, err := benchApply(ctx, n)
	require.NoError(t, err)
	t.Logf("apply:    Go %.0f/s, raw JS %.0f/s (%.2fx; median %.2f)", p.GoPerSec, p.JSPerSec, p.GoPerSec/p.JSPerSec, med(p.Ratios))
}

// TestBenchRunsBothSides runs a short comparison of each kind, as the bench
// does, and checks it measured both sides in every round.
func TestBenchRunsBothSides(t *testing.T) {
	for name, run := range map[string]func(context.Context, int) (benchResult, error){"allocate": benchAllocate, "apply": benchApply} {
		r, err := run(context.Background(), 8)
		require.NoError(t, err, name)
		require.Len(t, r.Ratios, 8, name)
		require.Positive(t, r.GoPerSec, name)
		require.Positive(t, r.JSPerSec, name)
	}
}

// med is the bench's figure: the median of the per-round ratios.
func med(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}
