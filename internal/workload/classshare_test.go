package workload

import (
	"math"
	"testing"
)

// TestClassShares: a histogram's counts split over the length classes, a
// bucket across a class boundary (2048, 8192, …) log-uniformly, and its
// quantiles read the same way.
func TestClassShares(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name   string
		h      Hist
		shares []float64
		p50    float64
	}{
		{"empty", Hist{Upper: []float64{500, inf}, Counts: []float64{0, 0}}, []float64{0, 0, 0, 0, 0}, 0},
		{"inside one class", Hist{Upper: []float64{200, 500, inf}, Counts: []float64{0, 10, 0}}, []float64{1, 0, 0, 0, 0}, math.Sqrt(200 * 500)},
		{"across 2048", Hist{Upper: []float64{1024, 4096, inf}, Counts: []float64{0, 4, 0}}, []float64{0.5, 0.5, 0, 0, 0}, 2048},
		{"two buckets", Hist{Upper: []float64{2048, 8192, 20000}, Counts: []float64{3, 1, 0}}, []float64{0.75, 0.25, 0, 0, 0}, 128}, // 0.5·4096^(2/3): rank 2 of 3 in (0.5, 2048]
		{"+Inf past 96k", Hist{Upper: []float64{100000, inf}, Counts: []float64{0, 2}}, []float64{0, 0, 0, 0, 1}, math.Sqrt(100000 * 200000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ClassShares(tc.h)
			for i := range got {
				if math.Abs(got[i]-tc.shares[i]) > 1e-9 {
					t.Fatalf("ClassShares = %v; want %v", got, tc.shares)
				}
			}
			if p := tc.h.Quantile(0.5); math.Abs(p-tc.p50) > 1e-6*max(tc.p50, 1) {
				t.Errorf("Quantile(0.5) = %g; want %g", p, tc.p50)
			}
		})
	}
}

// TestLiveRetain: a reader forgets the targets it is no longer given.
func TestLiveRetain(t *testing.T) {
	l := &Live{}
	l.targets = map[string]*liveTarget{"http://a/metrics": {}, "http://b/metrics": {}}
	l.Retain(map[string]bool{"http://b/metrics": true})
	if _, ok := l.targets["http://a/metrics"]; ok || len(l.targets) != 1 {
		t.Errorf("after Retain(b): %d targets, a kept %v", len(l.targets), ok)
	}
}
