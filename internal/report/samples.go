package report

import (
	"math"
	"slices"
	"strconv"

	"github.com/slaprobe/slaprobe/internal/sweep"
)

// NewSamples keeps a step's per-request values for report.json: each
// metric as measured when it has at most MaxSamples values, else
// MaxSamples evenly spaced order statistics of it (the smallest, the
// largest and equal rank steps between). The subsample is deterministic, so
// the same sweep always gives the same report, and it keeps the shape of
// the distribution, which is what a bootstrap of the median resamples.
// Values are rounded to 6 significant digits (a microsecond on a second)
// to keep the file small. It returns nil when the step has no values.
func NewSamples(s sweep.Samples) *Samples {
	out := &Samples{}
	keep := func(v []float64) []float64 {
		if len(v) == 0 {
			return nil
		}
		if len(v) > MaxSamples {
			out.Subsampled = true
			v = orderStatistics(v, MaxSamples)
		} else {
			v = slices.Clone(v)
		}
		for i, x := range v {
			v[i] = round6(x)
		}
		return v
	}
	out.TTFT, out.ITL, out.Decode, out.E2E, out.Prefill = keep(s.TTFT), keep(s.ITL), keep(s.Decode), keep(s.E2E), keep(s.Prefill)
	out.PrimingTTFT = keep(s.PrimingTTFT)
	// Like Good, never subsampled: a comparison judges the cached share on
	// slices of the follow-ups in the order they ended.
	for _, v := range s.CachedShare {
		out.CachedShare = append(out.CachedShare, round6(v))
	}
	out.Good = slices.Clone(s.Good)
	if out.TTFT == nil && out.ITL == nil && out.Decode == nil && out.E2E == nil && out.Prefill == nil && out.Good == nil &&
		out.CachedShare == nil && out.PrimingTTFT == nil {
		return nil
	}
	if s.RoundMedians != nil {
		out.RoundMedians = NewSamples(*s.RoundMedians)
	}
	return out
}

// orderStatistics returns k values of v at evenly spaced ranks, sorted.
func orderStatistics(v []float64, k int) []float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	out := make([]float64, k)
	for i := range out {
		out[i] = s[int(math.Round(float64(i)*float64(len(s)-1)/float64(k-1)))]
	}
	return out
}

func round6(x float64) float64 {
	if x == 0 || !finite(x) {
		return x
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 6, 64), 64)
	if err != nil {
		return x
	}
	return r
}

// finite reports whether v is a number that can be shown (not NaN or ±Inf).
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
