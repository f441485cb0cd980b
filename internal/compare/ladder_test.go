package compare

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ladderCritical against brute force: every assignment, within each
// stratum, of which pooled ranks belong to the base run, all equally likely
// under no change; ΣU counts the pairs (base, new) with new above base.
func TestLadderCriticalExact(t *testing.T) {
	for _, tc := range []struct {
		sizes [][2]int
		tail  float64
	}{
		{[][2]int{{3, 3}, {3, 3}}, 0.0025},
		{[][2]int{{2, 3}, {3, 2}, {2, 2}}, 0.01},
		{[][2]int{{3, 3}, {3, 3}, {3, 3}}, 0.025},
		{[][2]int{{4, 3}, {1, 1}}, 0.05},
	} {
		// counts[u] = how many assignments give ΣU = u.
		counts := map[int]float64{0: 1}
		total := 1.0
		for _, s := range tc.sizes {
			n1, n2 := s[0], s[1]
			next := map[int]float64{}
			ways := 0.0
			for mask := 0; mask < 1<<(n1+n2); mask++ {
				if popcount(mask) != n1 {
					continue
				}
				ways++
				u, below := 0, 0 // bit i set: rank i is the base run's
				for i := range n1 + n2 {
					if mask&(1<<i) != 0 {
						below++
					} else {
						u += below
					}
				}
				for v, c := range counts {
					next[v+u] += c
				}
			}
			counts, total = next, total*ways
		}
		want, cum := 0, 0.0
		for u := 0; ; u++ {
			if cum+counts[u]/total > tc.tail {
				want = u
				break
			}
			cum += counts[u] / total
		}
		if got := ladderCritical(tc.sizes, tc.tail); got != want {
			t.Errorf("sizes %v, tail %g: critical %d, brute force %d", tc.sizes, tc.tail, got, want)
		}
	}
}

func popcount(v int) int {
	n := 0
	for ; v > 0; v &= v - 1 {
		n++
	}
	return n
}

// Two runs of an unchanged server (every step's groups drawn from the same
// distribution, each step its own) get the ladder's interval at 90 %
// excluding zero in at most 10 % of 4000 seeded draws (binomial margin:
// 0.1 + 3σ), and a 20 % shift of every step excluded nearly always.
func TestLadderIntervalLevel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	draw := func(shift float64) []stratum {
		var s []stratum
		for i, n := range []int{1, 2, 4, 8, 16} {
			mean := 0.1 * float64(1+i)
			b, v := make([]float64, 3), make([]float64, 3)
			for j := range b {
				b[j] = mean * math.Exp(0.1*rng.NormFloat64())
				v[j] = shift * mean * math.Exp(0.1*rng.NormFloat64())
			}
			s = append(s, stratum{n: n, base: b, new: v})
		}
		return s
	}
	const reps = 4000
	excluded, detected := 0, 0
	for range reps {
		if iv, ok := ladderInterval(draw(1), 0.9); !ok || iv.Lo > 0 || iv.Hi < 0 {
			excluded++
		}
		if iv, ok := ladderInterval(draw(1.2), 0.9); ok && iv.Lo > 0 {
			detected++
		}
	}
	bound := reps * (0.1 + 3*math.Sqrt(0.1*0.9/reps))
	t.Logf("unchanged: %d of %d excluded zero (at most %.0f); 20 %% slower: %d detected", excluded, reps, bound, detected)
	if float64(excluded) > bound {
		t.Errorf("unchanged: the 90 %% ladder interval excluded zero in %d of %d draws; want at most %.0f", excluded, reps, bound)
	}
	if detected < reps*95/100 {
		t.Errorf("20 %% slower: detected in %d of %d; want 95 %%", detected, reps)
	}
}
