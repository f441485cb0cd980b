package compare

import (
	"math"
	"slices"
)

// rankBelow is the size under which a figure is judged with the exact rank
// interval instead of the bootstrap: when either run has fewer values
// (requests, burst rounds or slices) than this. A percentile bootstrap's
// interval lies within the data's range, so with few values it excludes
// zero whenever every value of one run lies past every value of the other,
// which happens to two runs of an unchanged server with probability
// 2/C(n₁+n₂, n₁) (10 % for 3 against 3) at any level asked for. The rank
// interval's level is exact at every size, and when the size cannot reach
// the level the figure gets no verdict.
const rankBelow = 30

// useRank says whether a figure of nb and nn values is judged with the
// exact rank interval.
func useRank(nb, nn int) bool { return min(nb, nn) < rankBelow }

// rankInterval is the distribution-free confidence interval at level of the
// shift Δ between the two runs (new = base + Δ), found by inverting the
// two-sided Mann–Whitney (Wilcoxon rank-sum) test: with the n₁·n₂ pairwise
// differences new_j − base_i sorted, it is [d₍ₖ₎, d₍ₙ₁ₙ₂₊₁₋ₖ₎] for the
// largest k with P(U ≤ k−1) ≤ (1−level)/2 under no change. It excludes zero
// exactly when the test rejects no change at 1 − level, and for two runs of
// an unchanged server (exchangeable values) that happens with probability
// at most 1 − level, at every size; ties only make it rarer. ok is false
// when the sizes cannot reach level at all: even full separation has a
// p-value (minRankP) above 1 − level.
func rankInterval(base, new []float64, level float64) (iv interval, ok bool) {
	n1, n2 := len(base), len(new)
	if n1 == 0 || n2 == 0 {
		return interval{}, false
	}
	k := rankCritical(n1, n2, (1-level)/2)
	if k < 1 {
		return interval{}, false
	}
	d := make([]float64, 0, n1*n2)
	for _, b := range base {
		for _, v := range new {
			d = append(d, v-b)
		}
	}
	slices.Sort(d)
	return interval{Lo: d[k-1], Hi: d[len(d)-k]}, true
}

// rankCritical returns the largest k such that P(U ≤ k−1) ≤ tail for the
// Mann–Whitney count U of sizes n1 and n2 under no change (0 when even
// P(U = 0) exceeds it). The null distribution is computed exactly, up to
// where it is needed, with the recurrence over the largest value of the
// pooled sample: it belongs to the first run with probability i/(i+j) and
// then lies above all j values of the second.
func rankCritical(n1, n2 int, tail float64) int {
	if n1 > n2 {
		n1, n2 = n2, n1
	}
	if minRankP(n1, n2)/2 > tail {
		return 0
	}
	// Grow the truncation until the cumulative probability passes tail;
	// U never exceeds n1·n2, and its distribution is symmetric about
	// n1·n2/2, so the lower tail never needs more than half.
	for limit := 64; ; limit *= 4 {
		limit = min(limit, n1*n2/2+1)
		f := rankPMF(n1, n2, limit)
		cum := 0.0
		for u, p := range f {
			if cum+p > tail {
				return u // P(U ≤ u−1) ≤ tail < P(U ≤ u)
			}
			cum += p
		}
		if limit == n1*n2/2+1 {
			return len(f)
		}
	}
}

// rankPMF returns P(U = u) for u < limit, for sizes n1 ≤ n2.
func rankPMF(n1, n2, limit int) []float64 {
	// prev[i] holds the distribution for sizes (i, j−1), cur[i] for (i, j).
	prev := make([][]float64, n1+1)
	cur := make([][]float64, n1+1)
	for i := range prev {
		prev[i] = make([]float64, limit)
		cur[i] = make([]float64, limit)
		prev[i][0] = 1 // sizes (i, 0): U = 0
	}
	for j := 1; j <= n2; j++ {
		clear(cur[0])
		cur[0][0] = 1 // sizes (0, j)
		for i := 1; i <= n1; i++ {
			pi, pj := float64(i)/float64(i+j), float64(j)/float64(i+j)
			c, down, left := cur[i], cur[i-1], prev[i]
			for u := range limit {
				v := pj * left[u]
				if u >= j {
					v += pi * down[u-j]
				}
				c[u] = v
			}
		}
		prev, cur = cur, prev
	}
	return prev[n1]
}

// minRankP is the smallest two-sided p-value the rank test can give for
// sizes n1 and n2: 2/C(n1+n2, n1), that of full separation. 3 against 3
// gives 0.1, 5 against 5 0.0079, 8 against 8 0.000155.
func minRankP(n1, n2 int) float64 {
	// log C(n1+n2, n1) with Lgamma: exact enough, and no overflow.
	lc, _ := math.Lgamma(float64(n1 + n2 + 1))
	l1, _ := math.Lgamma(float64(n1 + 1))
	l2, _ := math.Lgamma(float64(n2 + 1))
	return min(1, 2*math.Exp(-(lc-l1-l2)))
}

// rankSizeFor is the fewest values per run (the same in both) with which
// the rank interval can reach a figure's level: the smallest k with
// 2/C(2k, k) ≤ 1 − level. 6 for 99.75 % (20 figures at 95 %), 8 for up to
// 321 figures.
func rankSizeFor(level float64) int {
	k := 1
	for minRankP(k, k) > 1-level {
		k++
	}
	return k
}
