package harness

import (
	"math"
	"slices"
	"strconv"
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

// Rates is one benchmark comparison measured in alternating rounds: both
// rates over all rounds (per second) and, per round, tabfence's rate over
// the baseline's (JSON as the benchmark pages return it).
type Rates struct {
	Go     float64   `json:"go"`
	Raw    float64   `json:"raw"`
	Ratios []float64 `json:"ratios"`
}

// Ratio is the figure: the median of the per-round ratios. A burst of load
// elsewhere lands on whichever side is running; the median of many short
// rounds is robust to a few such rounds, where the pooled rates are not.
func (r Rates) Ratio() float64 { return Percentile(r.Ratios, 50) }

// Pooled is the ratio of the rates over all rounds.
func (r Rates) Pooled() float64 { return r.Go / r.Raw }

// Spread is "pooled X.XXx [min-max]" of the per-round ratios, printed
// beside the figure.
func (r Rates) Spread() string {
	return "pooled " + strconv.FormatFloat(r.Pooled(), 'f', 2, 64) + "x [" + strconv.FormatFloat(slices.Min(r.Ratios), 'f', 2, 64) + "-" + strconv.FormatFloat(slices.Max(r.Ratios), 'f', 2, 64) + "]"
}
