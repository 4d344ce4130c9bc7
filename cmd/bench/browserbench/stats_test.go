package browserbench

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPercentileNearestRank(t *testing.T) {
	xs := []float64{15, 20, 35, 40, 50}
	for p, want := range map[float64]float64{0: 15, 5: 15, 30: 20, 40: 20, 50: 35, 95: 50, 100: 50} {
		assert.Equal(t, want, percentile(xs, p), "p%v", p)
	}
	assert.True(t, math.IsNaN(percentile(nil, 50)), "percentile of nothing must be NaN")
}

// A rate figure is the median of its per-round ratios; the pooled ratio and
// the range are printed beside it.
func TestRatesFigure(t *testing.T) {
	r := rates{Go: 800, Raw: 1000, Ratios: []float64{0.2, 0.7, 0.8, 0.9, 3}}
	assert.Equal(t, 0.8, r.Ratio(), "ratio %v pooled %v, want 0.8 and 0.8", r.Ratio(), r.Pooled())
	assert.Equal(t, 0.8, r.Pooled(), "ratio %v pooled %v, want 0.8 and 0.8", r.Ratio(), r.Pooled())
	assert.Equal(t, "pooled 0.80x [0.20-3.00]", r.Spread(), "spread")
}
