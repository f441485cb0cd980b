package sweep

// This file holds the order statistics that the sweep, the status page and
// comparisons share: summaries, one quantile, one median, and the Stat a
// threshold is read on.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
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

// Summary describes a distribution of per-request values in base units
// (seconds, tokens/s). Percentiles interpolate linearly between closest
// ranks.
type Summary struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Min   float64 `json:"min"`
	P1    float64 `json:"p1"`
	P5    float64 `json:"p5"`
	P10   float64 `json:"p10"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Dist is the part of a Summary that report.json keeps of one metric over
// the requests of a step (Summary.Dist).
type Dist struct {
	Mean float64 `json:"mean"`
	// P1 and P10 are kept for speeds, where the slow tail is the low
	// percentile (P10: the speed 90 % of requests got or better); absent in
	// older reports. The report's decode columns show them.
	P1  float64 `json:"p1,omitempty"`
	P10 float64 `json:"p10,omitempty"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// Dist is what report.json keeps of s.
func (s Summary) Dist() Dist {
	return Dist{Mean: s.Mean, P1: s.P1, P10: s.P10, P50: s.P50, P90: s.P90, P95: s.P95, P99: s.P99}
}

// Stat returns the named statistic of a lower-is-better distribution
// (Stat.Pick decides, as it does for Summary.Worse).
func (d Dist) Stat(st Stat) float64 {
	return st.Pick(d.Mean, d.P50, d.P90, d.P95, d.P99)
}

// Summarize sorts a copy of values and describes it.
func Summarize(values []float64) Summary {
	if len(values) == 0 {
		return Summary{}
	}
	v := append([]float64(nil), values...)
	sort.Float64s(v)
	var sum float64
	for _, x := range v {
		sum += x
	}
	return Summary{
		Count: len(v), Mean: sum / float64(len(v)), Min: v[0], Max: v[len(v)-1],
		P1: Quantile(v, 0.01), P5: Quantile(v, 0.05), P10: Quantile(v, 0.10),
		P50: Quantile(v, 0.50), P90: Quantile(v, 0.90), P95: Quantile(v, 0.95), P99: Quantile(v, 0.99),
	}
}

// Stat selects which statistic of a step's per-request distribution a
// limit is judged on.
type Stat string

// ParseStat accepts mean, p50, p90, p95 and p99 (also "median").
func ParseStat(s string) (Stat, error) {
	switch st := Stat(strings.ToLower(strings.TrimSpace(s))); st {
	case StatMean, StatP50, StatP90, StatP95, StatP99:
		return st, nil
	case "median":
		return StatP50, nil
	}
	return "", fmt.Errorf("statistic %q: expected one of mean, p50, p90, p95, p99", s)
}

// Pick returns the statistic s names among those of a lower-is-better
// distribution (TTFT, E2E, ITL): p90 is the value 90 % of requests stay
// under. This is the one place a statistic name is resolved; an unknown
// name (ParseStat rejects them in configs) gives the mean.
func (s Stat) Pick(mean, p50, p90, p95, p99 float64) float64 {
	switch s {
	case StatP50:
		return p50
	case StatP90:
		return p90
	case StatP95:
		return p95
	case StatP99:
		return p99
	}
	return mean
}

// Worse is the statistic st of a lower-is-better metric (see Stat.Pick).
func (s Summary) Worse(st Stat) float64 {
	return st.Pick(s.Mean, s.P50, s.P90, s.P95, s.P99)
}

// WorseLow is the mirror statistic for a higher-is-better metric (decode
// speed): p90 selects the 10th percentile, the speed 90 % of users get.
func (s Summary) WorseLow(st Stat) float64 {
	return st.Pick(s.Mean, s.P50, s.P10, s.P5, s.P1)
}

const (
	StatMean Stat = "mean"
	StatP50  Stat = "p50"
	StatP90  Stat = "p90"
	StatP95  Stat = "p95"
	StatP99  Stat = "p99"
)
