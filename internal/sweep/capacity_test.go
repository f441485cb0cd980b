package sweep

import (
	"math"
	"testing"
	"time"

	"github.com/slaprobe/slaprobe/prober"
)

func TestScalingEfficiency(t *testing.T) {
	for _, tc := range []struct {
		name             string
		system, baseline float64
		n                int
		want             float64
	}{
		// A published benchmark (run `001`, chatbot): 152.9 tok/s at N=1 and 39 % at N=32,
		// which implies a system throughput of about 1,908 tok/s.
		{"001 chatbot N=32", 0.39 * 152.9 * 32, 152.9, 32, 0.39},
		{"perfect scaling", 4 * 100, 100, 4, 1},
		{"N=1 is 100 %", 152.9, 152.9, 1, 1},
		{"no baseline", 1908, 0, 32, 0},
		{"no concurrency", 1908, 152.9, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ScalingEfficiency(tc.system, tc.baseline, tc.n); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("ScalingEfficiency(%g, %g, %d) = %g; want %g", tc.system, tc.baseline, tc.n, got, tc.want)
			}
		})
	}
	// And the other way round: the system figure that report derives.
	if sys := 0.39 * 152.9 * 32; math.Round(sys) != 1908 {
		t.Errorf("001: system at N=32 = %.1f; the report says ≈ 1,908 tok/s", sys)
	}
}

func TestMaxWithin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pts    []CapacityPoint
		limit  float64
		dir    Direction
		want   string
		wantN  int
		approx bool
		bound  CapacityBound
		nonMon bool
	}{
		{
			// `000` chatbot: TTFT 8.25 s at a burst of 256 (the report's worst
			// case); with 2.87 s at 128 the 3.0 s line is crossed at ~131, the
			// report's max safe queue.
			name: "000 chatbot max safe queue ~131",
			pts: []CapacityPoint{{1, 0.19}, {2, 0.21}, {4, 0.25}, {8, 0.33}, {16, 0.5},
				{32, 0.85}, {64, 1.55}, {128, 2.87}, {256, 8.25}},
			limit: 3.0, dir: LowerIsBetter, want: "~131", wantN: 131, approx: true, bound: BoundWithin,
		},
		{
			// `000` tool_calling: max safe queue 8, a measured rung.
			name:  "000 tool_calling max safe queue 8",
			pts:   []CapacityPoint{{1, 0.9}, {2, 1.2}, {4, 1.8}, {8, 2.9}, {16, 5.6}, {32, 11}},
			limit: 3.0, dir: LowerIsBetter, want: "8", wantN: 8, bound: BoundWithin,
		},
		{
			// `000` agentic: max safe queue 19, between the rungs 16 and 32.
			name:  "000 agentic max safe queue ~19",
			pts:   []CapacityPoint{{8, 1.4}, {16, 2.6}, {32, 4.6}},
			limit: 3.0, dir: LowerIsBetter, want: "~19", wantN: 19, approx: true, bound: BoundWithin,
		},
		{
			name:  "every rung within: at least the largest",
			pts:   []CapacityPoint{{1, 0.1}, {256, 2.9}},
			limit: 3.0, dir: LowerIsBetter, want: "≥256", wantN: 256, bound: BoundAtLeast,
		},
		{
			name:  "smallest rung already over",
			pts:   []CapacityPoint{{2, 4}, {4, 5}},
			limit: 3.0, dir: LowerIsBetter, want: "<2", wantN: 0, bound: BoundBelow,
		},
		{
			// A noisy dip after the first failure does not raise capacity.
			name:  "non-monotonic recovery ignored",
			pts:   []CapacityPoint{{1, 1}, {2, 2}, {4, 3.5}, {8, 2.5}, {16, 6}},
			limit: 3.0, dir: LowerIsBetter, want: "~3", wantN: 3, approx: true, bound: BoundWithin, nonMon: true,
		},
		{
			// Unsorted input with a dip that stays within the limit.
			name:  "unsorted input",
			pts:   []CapacityPoint{{4, 2.0}, {1, 1.0}, {2, 2.2}, {8, 4.0}},
			limit: 3.0, dir: LowerIsBetter, want: "~5", wantN: 5, approx: true, bound: BoundWithin,
		},
		{
			// Decode speed must stay >= 15 tok/s (general_chat): 20 at N=4,
			// 12 at N=6 crosses at 4 + (20-15)/(20-12)·2 = 5.25.
			name:  "decode floor",
			pts:   []CapacityPoint{{1, 80}, {2, 40}, {4, 20}, {6, 12}},
			limit: 15, dir: HigherIsBetter, want: "~5", wantN: 5, approx: true, bound: BoundWithin,
		},
		{
			name: "no data", pts: nil, limit: 3, want: "?", bound: BoundUnknown,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := MaxWithin(tc.pts, tc.limit, tc.dir)
			if c.String() != tc.want || c.N != tc.wantN || c.Approximate != tc.approx || c.Bound != tc.bound || c.NonMonotonic != tc.nonMon {
				t.Errorf("MaxWithin = %s %+v; want %s (N=%d approx=%v bound=%s nonMonotonic=%v)",
					c, c, tc.want, tc.wantN, tc.approx, tc.bound, tc.nonMon)
			}
		})
	}
}

func swStep(n int, ttft, itl, e2e, decode, success float64) StepResult {
	s := StepResult{Concurrency: n, Requests: 10, Succeeded: int(math.Round(success * 10)), SuccessRatio: success}
	one := func(v float64) Summary {
		return Summary{Count: 10, Mean: v, Min: v, P1: v, P5: v, P10: v, P50: v, P90: v, P95: v, P99: v, Max: v}
	}
	s.TTFT, s.ITL, s.E2E, s.Decode = one(ttft), one(itl), one(e2e), one(decode)
	return s
}

func TestUseCaseCapacity(t *testing.T) {
	// general_chat: TTFT < 8 s and decode > 15 tok/s. TTFT binds first here.
	th := prober.Thresholds{TTFT: 8 * time.Second, MinDecode: 15}
	steps := []StepResult{
		swStep(1, 2.0, 0.012, 14, 80, 1),
		swStep(2, 4.0, 0.020, 24, 50, 1),
		swStep(4, 7.0, 0.040, 47, 25, 1),
		swStep(6, 11.0, 0.070, 80, 14, 1),
	}
	c := UseCaseCapacityOf(steps, th, DefaultCapacityOptions())
	// TTFT: 4 + (8-7)/(11-7)·2 = 4.5 → 4 (a measured rung);
	// decode: 4 + (25-15)/(25-14)·2 ≈ 5.8 → ~5.
	if c.String() != "4" || c.LimitedBy != "ttft" || c.Approximate {
		t.Errorf("capacity = %s limited by %q; want 4 limited by ttft", c, c.LimitedBy)
	}
	if len(c.Limits) != 3 {
		t.Fatalf("limits = %+v; want ttft, decode and success", c.Limits)
	}
	for _, l := range c.Limits {
		want := map[string]string{"ttft": "4", "decode": "~5", "success": "≥6"}[l.Kind]
		if l.String() != want {
			t.Errorf("limit %s = %s; want %s", l.Kind, l.String(), want)
		}
	}

	// code_completion: E2E < 2 s only.
	c = UseCaseCapacityOf([]StepResult{swStep(1, 0.05, 0.008, 1.1, 120, 1), swStep(2, 0.06, 0.009, 1.3, 110, 1),
		swStep(4, 0.08, 0.012, 1.7, 85, 1), swStep(8, 0.1, 0.02, 2.7, 50, 1)}, prober.Thresholds{E2E: 2 * time.Second}, DefaultCapacityOptions())
	if c.String() != "~5" || c.LimitedBy != "e2e" {
		t.Errorf("code_completion capacity = %s by %q; want ~5 by e2e", c, c.LimitedBy)
	}

	// Failures bind when latencies look fine: a step where half failed is
	// over the 95 % success floor.
	c = UseCaseCapacityOf([]StepResult{swStep(1, 1, 0.01, 3, 100, 1), swStep(2, 1, 0.01, 3, 100, 1), swStep(4, 1, 0.01, 3, 100, 0.5)},
		prober.Thresholds{TTFT: 3 * time.Second}, DefaultCapacityOptions())
	if c.N != 2 || c.LimitedBy != "success" {
		t.Errorf("capacity with failures = %s by %q; want 2 by success", c, c.LimitedBy)
	}
}

func TestMaxSafeQueueStat(t *testing.T) {
	mk := func(n int, mean, p90 float64) StepResult {
		s := swStep(n, mean, 0.02, mean+3, 50, 1)
		s.TTFT.P90 = p90
		return s
	}
	burst := []StepResult{mk(16, 1, 1.8), mk(32, 2, 3.6), mk(64, 4, 7.2)}
	opts := DefaultCapacityOptions()
	if c := MaxSafeQueue(burst, opts); c.String() != "~48" {
		t.Errorf("mean: max safe queue = %s; want ~48", c)
	}
	opts.Stat = StatP90
	// p90: 16 + (3-1.8)/(3.6-1.8)·16 ≈ 26.7 → ~26.
	if c := MaxSafeQueue(burst, opts); c.String() != "~26" {
		t.Errorf("p90: max safe queue = %s; want ~26", c)
	}
	opts.MaxSafeTTFT = 10 * time.Second
	if c := MaxSafeQueue(burst, opts); c.String() != "≥64" {
		t.Errorf("p90 10 s: max safe queue = %s; want ≥64", c)
	}
}

func TestParseStat(t *testing.T) {
	for in, want := range map[string]Stat{"mean": StatMean, "P90": StatP90, " p99 ": StatP99, "median": StatP50} {
		if got, err := ParseStat(in); err != nil || got != want {
			t.Errorf("ParseStat(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseStat("p42"); err == nil {
		t.Error("ParseStat(p42) succeeded; want an error")
	}
}

func TestSummarize(t *testing.T) {
	v := make([]float64, 0, 101)
	for i := 100; i >= 0; i-- {
		v = append(v, float64(i))
	}
	s := Summarize(v)
	if s.Count != 101 || s.Mean != 50 || s.Min != 0 || s.Max != 100 || s.P50 != 50 || s.P90 != 90 || s.P99 != 99 || s.P10 != 10 {
		t.Errorf("Summarize(0..100) = %+v", s)
	}
	if s := Summarize([]float64{1, 2}); s.P50 != 1.5 {
		t.Errorf("P50 of {1,2} = %g; want 1.5 (linear between ranks)", s.P50)
	}
	if s := Summarize(nil); s.Count != 0 {
		t.Errorf("Summarize(nil) = %+v; want zero", s)
	}
	if s.WorseLow(StatP90) != s.P10 || s.Worse(StatP90) != s.P90 || s.Worse(StatMean) != s.Mean {
		t.Error("Worse/WorseLow picked the wrong statistic")
	}
}
