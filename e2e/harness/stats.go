package harness

import (
	"math"
	"slices"
)

// Percentile returns the p-th percentile of xs by the nearest-rank method
// (p in 0..100): a value that was actually measured, never an
// interpolation. NaN for no samples.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}
