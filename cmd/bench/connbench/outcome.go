package connbench

import (
	"errors"
	"fmt"

	"github.com/tabfence/tabfence/e2e/harness"
)

// outcome is one side of a figure: its samples, or why it has none.
type outcome struct {
	xs  []float64
	err error
}

func (o outcome) measured() bool { return o.err == nil && len(o.xs) > 0 }

// pct is the p-th percentile (nearest rank, a measured value).
func (o outcome) pct(p float64) float64 { return harness.Percentile(o.xs, p) }

// cell prints the p-th percentile with format f, or why it is missing.
func (o outcome) cell(f string, p float64) string {
	switch {
	case o.err != nil && errors.Is(o.err, errUnavailable):
		return "not measured"
	case o.err != nil:
		return "failed"
	case len(o.xs) == 0:
		return "no samples"
	}
	return fmt.Sprintf(f, o.pct(p))
}

// failure is o's error unless the side is merely unavailable in this build.
func (o outcome) failure(what string) error {
	if o.err == nil || errors.Is(o.err, errUnavailable) {
		return nil
	}
	return fmt.Errorf("%s: %w", what, o.err)
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

// met compares the tabfence side with its target when both sides ran.
func met(tf, raw outcome, ok func(tf, raw outcome) bool) string {
	if !tf.measured() || !raw.measured() {
		return ""
	}
	return yes(ok(tf, raw))
}
