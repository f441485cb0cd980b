package compare

import (
	"hash/fnv"
	"math/rand/v2"
	"slices"

	"github.com/slaprobe/slaprobe/internal/sweep"
)

// interval is a bootstrap percentile interval of median(new) − median(base).
type interval struct {
	Lo, Hi float64
}

// medianDiffInterval resamples both sides with replacement resamples times
// and returns the (1−level)/2 and (1+level)/2 percentiles of the difference
// of the resampled medians. The generator is a PCG seeded with seed and a
// hash of key, so each figure gets its own reproducible stream whatever the
// order figures are compared in.
func medianDiffInterval(base, new []float64, resamples int, level float64, seed uint64, key string) interval {
	h := fnv.New64a()
	h.Write([]byte(key))
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	sb, sn := sorted(base), sorted(new)
	cb, cn := make([]int, len(sb)), make([]int, len(sn))
	diffs := make([]float64, resamples)
	for i := range diffs {
		diffs[i] = resampledMedian(sn, cn, rng) - resampledMedian(sb, cb, rng)
	}
	slices.Sort(diffs)
	a := (1 - level) / 2
	return interval{Lo: sweep.Quantile(diffs, a), Hi: sweep.Quantile(diffs, 1-a)}
}

func sorted(v []float64) []float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s
}

// resampledMedian draws len(s) indices of sorted s with replacement and
// returns the median of the drawn values. It counts draws per index instead
// of sorting the resample: O(n) per resample.
func resampledMedian(s []float64, counts []int, rng *rand.Rand) float64 {
	n := len(s)
	clear(counts)
	for range n {
		counts[rng.IntN(n)]++
	}
	lo, hi := (n-1)/2, n/2 // ranks of the median (equal when n is odd)
	seen := 0
	var vlo float64
	found := false
	for i, c := range counts {
		seen += c
		if !found && seen > lo {
			vlo, found = s[i], true
		}
		if seen > hi {
			return (vlo + s[i]) / 2
		}
	}
	return s[n-1]
}
