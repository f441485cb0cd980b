package prober

// This file holds the order statistics that the sweep, the status page and
// comparisons share: one quantile, one median.

import (
	"math"
	"slices"
)

// Quantile is the q-quantile (0 ≤ q ≤ 1) of sorted values, linear between
// the closest ranks (the "type 7" of R and NumPy's default); NaN when there
// are none. sorted must be in ascending order.
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	pos := q * float64(n-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, n-1)
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

// Median is the median of v, which it does not modify; NaN when v is empty.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return Quantile(s, 0.5)
}
