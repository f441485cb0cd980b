package slo

import (
	"math"
	"slices"
	"testing"
)

// TestBucketEdges checks that every bucket list rises strictly and that
// every experience band's edge is a bucket edge, in the full and the reduced
// lists alike, so that "fraction of probes within a band" is an exact count
// and the alert rules, which count good probes from these edges, never
// select a bound the collector does not export.
func TestBucketEdges(t *testing.T) {
	for _, c := range []struct {
		name          string
		full, reduced []float64
		bands         *Bands
	}{
		{"ttft", TTFTBuckets, TTFTBucketsReduced, &TTFTBands},
		{"itl", ITLBuckets, ITLBucketsReduced, &ITLBands},
		{"decode", DecodeBuckets, DecodeBucketsReduced, &DecodeBands},
		{"e2e", E2EBuckets, E2EBucketsReduced, nil},
		{"prefill", PrefillBuckets, PrefillBucketsReduced, nil},
		{"chunk", ChunkBuckets, ChunkBucketsReduced, nil},
		{"acceptance", AcceptanceBuckets, AcceptanceBucketsReduced, nil},
	} {
		for _, l := range []struct {
			kind  string
			edges []float64
		}{{"full", c.full}, {"reduced", c.reduced}} {
			if len(l.edges) == 0 {
				t.Errorf("%s %s: no edges", c.name, l.kind)
			}
			for i := 1; i < len(l.edges); i++ {
				if l.edges[i] <= l.edges[i-1] {
					t.Errorf("%s %s: edge %v after %v; expected strictly rising edges", c.name, l.kind, l.edges[i], l.edges[i-1])
				}
			}
			if c.bands == nil {
				continue
			}
			for _, e := range c.bands.Edges {
				if !slices.Contains(l.edges, e) {
					t.Errorf("%s %s: band edge %v of %q is not a bucket edge %v", c.name, l.kind, e, c.bands.Metric, l.edges)
				}
			}
		}
	}
}

// TestChartsUnique checks that no two charts share a data-chart name.
func TestChartsUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Charts {
		if seen[c] {
			t.Errorf("chart %q listed twice", c)
		}
		seen[c] = true
	}
}

// TestObjectives checks the objectives are shares strictly between 0 and 1.
func TestObjectives(t *testing.T) {
	for name, o := range map[string]float64{"Objective": Objective, "GoodputObjective": GoodputObjective} {
		if o <= 0 || o >= 1 {
			t.Errorf("%s = %v; expected a share strictly between 0 and 1", name, o)
		}
	}
}

func TestCosts(t *testing.T) {
	if got := CostPerHour(1000, 0.10); math.Abs(got-0.10) > 1e-12 {
		t.Errorf("1 kW for an hour = %v", got)
	}
	if got := CostPerMillionTokens(3.6, 0.10); math.Abs(got-0.10) > 1e-12 {
		t.Errorf("3.6 J/token → 1 kWh per Mtok = %v", got)
	}
}
