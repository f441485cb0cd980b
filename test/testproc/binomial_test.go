package testproc

import (
	"math"
	"testing"
)

// TestClopperPearson against the closed forms at k = 0 and k = n (1 − 0.025^(1/n)) and against
// tabulated intervals (R's binom.test).
func TestClopperPearson(t *testing.T) {
	for _, tc := range []struct {
		k, n   int
		lo, hi float64
	}{
		{0, 20, 0, 1 - math.Pow(0.025, 1.0/20)},
		{20, 20, math.Pow(0.025, 1.0/20), 1},
		{1, 20, 0.001265, 0.248733},
		{10, 20, 0.271958, 0.728042},
		{2, 3, 0.094299, 0.991596},
	} {
		lo, hi := ClopperPearson(tc.k, tc.n)
		if math.Abs(lo-tc.lo) > 1e-5 || math.Abs(hi-tc.hi) > 1e-5 {
			t.Errorf("ClopperPearson(%d, %d) = [%.6f, %.6f], want [%.6f, %.6f]", tc.k, tc.n, lo, hi, tc.lo, tc.hi)
		}
	}
}
