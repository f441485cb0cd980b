package testproc

import "math"

// ClopperPearson is the exact two-sided 95 % confidence interval of a rate seen k times in n
// independent trials (Clopper–Pearson): lo is the p at which P(X ≥ k) = 2.5 %, hi the p at which
// P(X ≤ k) = 2.5 %, for X ~ Binomial(n, p); 0 when k = 0, 1 when k = n.
func ClopperPearson(k, n int) (lo, hi float64) {
	cdf := func(k int, p float64) float64 { // P(X ≤ k)
		sum := 0.0
		for c := 0; c <= k; c++ {
			lc, _ := math.Lgamma(float64(n + 1))
			l1, _ := math.Lgamma(float64(c + 1))
			l2, _ := math.Lgamma(float64(n - c + 1))
			sum += math.Exp(lc - l1 - l2 + float64(c)*math.Log(p) + float64(n-c)*math.Log1p(-p))
		}
		return sum
	}
	// bisect returns the p in (0, 1) where f, false below it and true above, turns.
	bisect := func(f func(float64) bool) float64 {
		a, b := 0.0, 1.0
		for range 60 {
			if m := (a + b) / 2; f(m) {
				b = m
			} else {
				a = m
			}
		}
		return (a + b) / 2
	}
	lo, hi = 0, 1
	if k > 0 {
		lo = bisect(func(p float64) bool { return 1-cdf(k-1, p) >= 0.025 })
	}
	if k < n {
		hi = bisect(func(p float64) bool { return cdf(k, p) <= 0.025 })
	}
	return lo, hi
}
