package compare

import (
	"math"
	"testing"

	"github.com/slaprobe/slaprobe/internal/report"
)

// arrangements calls f with every way of choosing which n1 of the ranks
// 0..n1+n2−1 belong to the first run (true) and which to the second.
func arrangements(n1, n2 int, f func(first []bool)) {
	first := make([]bool, n1+n2)
	var rec func(i, left int)
	rec = func(i, left int) {
		if i == len(first) {
			if left == 0 {
				f(first)
			}
			return
		}
		if left > 0 {
			first[i] = true
			rec(i+1, left-1)
		}
		first[i] = false
		rec(i+1, left)
	}
	rec(0, n1)
}

// The exact null distribution of the Mann–Whitney count agrees with every
// arrangement of the ranks counted by hand.
func TestRankPMF(t *testing.T) {
	for _, sz := range [][2]int{{1, 1}, {2, 3}, {3, 3}, {4, 6}, {5, 5}, {6, 7}} {
		n1, n2 := sz[0], sz[1]
		counts := make([]float64, n1*n2+1)
		total := 0.0
		arrangements(n1, n2, func(first []bool) {
			u, seen2 := 0, 0 // pairs with the first run's value above the second's
			for _, f := range first {
				if f {
					u += seen2
				} else {
					seen2++
				}
			}
			counts[u]++
			total++
		})
		got := rankPMF(min(n1, n2), max(n1, n2), n1*n2+1)
		for u := range counts {
			if want := counts[u] / total; math.Abs(got[u]-want) > 1e-12 {
				t.Errorf("%d×%d: P(U=%d) = %g, want %g", n1, n2, u, got[u], want)
			}
		}
		if p := minRankP(n1, n2); math.Abs(p-min(1, 2/total)) > 1e-9 {
			t.Errorf("%d×%d: smallest p %g, want %g", n1, n2, p, 2/total)
		}
	}
	for _, tc := range []struct {
		n    int
		want float64
	}{{3, 0.1}, {5, 2.0 / 252}, {8, 2.0 / 12870}} {
		if p := minRankP(tc.n, tc.n); math.Abs(p-tc.want) > 1e-12 {
			t.Errorf("%d against %d: smallest p %g, want %g", tc.n, tc.n, p, tc.want)
		}
	}
	for _, tc := range []struct {
		level float64
		want  int
	}{{0.95, 4}, {1 - 0.05/20, 6}, {1 - 0.05/300, 8}, {1 - 0.05/321, 8}, {1 - 0.05/322, 9}} {
		if k := rankSizeFor(tc.level); k != tc.want {
			t.Errorf("level %v: %d values per run, want %d", tc.level, k, tc.want)
		}
	}
}

// The rank interval's level is exact at every size: over every arrangement
// of two runs of an unchanged server (each equally likely), it excludes
// zero in at most 1 − level of them, and where the sizes cannot reach the
// level it gives none. The percentile bootstrap of the same data excludes
// zero in every fully separated arrangement, whatever the level: 10 % of
// them for 3 against 3.
func TestRankIntervalLevel(t *testing.T) {
	for _, tc := range []struct {
		n1, n2 int
		level  float64
		ok     bool
	}{
		{3, 3, 0.95, false}, {4, 4, 0.95, true}, {3, 5, 0.95, true}, {5, 5, 0.99, true}, {5, 5, 0.9975, false},
		{6, 6, 0.9975, true}, {8, 8, 1 - 0.05/300, true}, {7, 9, 0.99, true},
	} {
		flagged, bootFlagged, total := 0, 0, 0
		arrangements(tc.n1, tc.n2, func(first []bool) {
			var base, cur []float64
			for r, f := range first {
				if f {
					base = append(base, float64(r+1))
				} else {
					cur = append(cur, float64(r+1))
				}
			}
			iv, ok := rankInterval(base, cur, tc.level)
			if ok != tc.ok {
				t.Fatalf("%d×%d at %v: ok %v, want %v", tc.n1, tc.n2, tc.level, ok, tc.ok)
			}
			if ok && (iv.Lo > 0 || iv.Hi < 0) {
				flagged++
			}
			if tc.n1 == 3 && tc.n2 == 3 {
				if b := medianDiffInterval(base, cur, 4000, tc.level, 1, "x"); b.Lo > 0 || b.Hi < 0 {
					bootFlagged++
				}
			}
			total++
		})
		rate := float64(flagged) / float64(total)
		if rate > 1-tc.level+1e-12 {
			t.Errorf("%d×%d at %v: excludes zero in %d of %d arrangements (%.4f)", tc.n1, tc.n2, tc.level, flagged, total, rate)
		}
		if tc.ok && flagged == 0 {
			t.Errorf("%d×%d at %v: never excludes zero; the interval is not at its level", tc.n1, tc.n2, tc.level)
		}
		if tc.n1 == 3 && tc.n2 == 3 && bootFlagged != 2 {
			t.Errorf("3×3: the bootstrap excluded zero in %d of 20 arrangements; the fault it replaces is 2 (both full separations)", bootFlagged)
		}
	}
}

// detectable_ratio is what it says: every value of NEW moved by a little
// more than it, in either direction, is called significant, and moved by a
// little less in the harder direction it is not.
func TestDetectableIsTheSmallestShiftCalled(t *testing.T) {
	shifted := func(st report.Step, by float64) report.Step {
		s := *st.Samples
		s.TTFT = append([]float64(nil), s.TTFT...)
		for i := range s.TTFT {
			s.TTFT[i] += by
		}
		st.Samples = &s
		return st
	}
	for _, tc := range []struct {
		name      string
		base, cur *report.Report
		n         int // the closed-loop step
	}{
		{"requests (bootstrap)", synthetic(1, 1, 0.1, []int{1}, []int{8}), synthetic(2, 1.01, 0.1, []int{1}, []int{8}), 1},
		{"slices (rank)", familyReport(3), familyReport(4), 4},
		// 3 % faster with a narrow interval: the floor, not the interval,
		// sets how far NEW must move up to be called.
		{"below the floor", synthetic(1, 1, 0.01, []int{1}, []int{8}), synthetic(2, 0.97, 0.01, []int{1}, []int{8}), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Compare(tc.base, tc.cur, Options{}).Comparison
			st := c.Step("chat", "closed_loop", tc.n)
			m := st.Metric(report.MetricTTFT)
			if m == nil || m.Verdict != report.VerdictNoChange || m.Detectable == nil {
				t.Fatalf("TTFT of %s N=%d: %+v; want no detectable change", st.Mode, st.Concurrency, m)
			}
			d := *m.Detectable
			up, down := max(-*m.Low, 0.05-m.Change), max(*m.High, 0.05+m.Change)
			if d != max(up, down) {
				t.Fatalf("detectable %v; want the larger of %v up and %v down", d, up, down)
			}
			hard := 1.0 // the harder direction: the one d was set by
			if down > up {
				hard = -1
			}
			scenario := tc.cur.Scenarios[0]
			idx := -1
			for i, s := range scenario.Steps(st.Mode) {
				if s.Concurrency == st.Concurrency {
					idx = i
				}
			}
			verdictAfter := func(by float64) string {
				cur := *tc.cur
				sc := scenario
				steps := append([]report.Step(nil), sc.Steps(st.Mode)...)
				steps[idx] = shifted(steps[idx], by*m.Base)
				if st.Mode == "burst" {
					sc.Burst = steps
				} else {
					sc.ClosedLoop = steps
				}
				cur.Scenarios = []report.Scenario{sc}
				return Compare(tc.base, &cur, Options{}).Comparison.Step(st.Scenario, st.Mode, st.Concurrency).Metric(report.MetricTTFT).Verdict
			}
			for _, dir := range []float64{1, -1} {
				if v := verdictAfter(dir * (d + 0.01)); v == report.VerdictNoChange {
					t.Errorf("NEW moved by %+.3f of base: %s; want it called", dir*(d+0.01), v)
				}
			}
			if v := verdictAfter(hard * (d - 0.01)); v != report.VerdictNoChange {
				t.Errorf("NEW moved by %+.3f of base (less than detectable %.3f): %s; want no change", hard*(d-0.01), d, v)
			}
			t.Logf("change %+.3f, interval %s, detectable %.3f", m.Change, intervalText(m), d)
		})
	}
}
