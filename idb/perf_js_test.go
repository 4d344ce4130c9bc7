//go:build js && wasm

package idb

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestAllocateRateVersusRawJS logs token allocations and fenced applies per
// second beside the same transactions in raw JavaScript in the same page,
// interleaved (figures only; the bench target is 0.8x raw).
func TestAllocateRateVersusRawJS(t *testing.T) {
	if os.Getenv("TABFENCE_PERF") == "" {
		t.Skip("set TABFENCE_PERF=1")
	}
	ctx := context.Background()
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
	a, err := BenchAllocate(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("allocate: Go %.0f/s, raw JS %.0f/s (%.2fx; per round %.2f)", a.GoPerSec, a.JSPerSec, a.GoPerSec/a.JSPerSec, a.Ratios)
	prevGo, prevJS = 0, 0
	p, err := BenchApply(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("apply:    Go %.0f/s, raw JS %.0f/s (%.2fx; per round %.2f)", p.GoPerSec, p.JSPerSec, p.GoPerSec/p.JSPerSec, p.Ratios)
}
