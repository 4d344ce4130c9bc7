package browserbench

import "github.com/tabfence/tabfence/e2e/harness"

// percentile is harness.Percentile (nearest rank: a measured value).
func percentile(xs []float64, p float64) float64 { return harness.Percentile(xs, p) }
