package compare

import (
	"math/rand/v2"
	"testing"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/report/render"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// persistentModes returns n TTFTs, in the order the requests ended, of a
// closed loop at N=4 on the simulated engine: a request waited for no other
// prefill (0.104 s), for part of one (0.138 s, 0.173 s) or for a whole one
// (0.277 s), and which follows a pattern of the four users that holds for
// several requests: each request keeps the mode of the one before with
// probability stay, else draws one (a quarter fast, a quarter each part,
// the rest whole).
func persistentModes(seed uint64, n int, stay float64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 11))
	modes := []float64{0.104, 0.138, 0.173, 0.277, 0.277}
	draw := func() float64 { return modes[rng.IntN(len(modes))] }
	v := make([]float64, n)
	cur := draw()
	for i := range v {
		if rng.Float64() >= stay {
			cur = draw()
		}
		v[i] = cur * (1 + 0.004*rng.NormFloat64())
	}
	return v
}

// noisySamples returns n values around mean with a relative spread of rel.
func noisySamples(rng *rand.Rand, n int, mean, rel float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = mean * (1 + rel*rng.NormFloat64())
	}
	return v
}

// familyReport is a report of one scenario with closed-loop steps at N=1,
// 2, 4 and 8, every metric sampled from the same engine for the seed, the
// TTFT at N=4 from persistentModes: 20 figures with an interval.
func familyReport(seed uint64) *report.Report {
	rng := rand.New(rand.NewPCG(seed, 3))
	noisy := func(n int, mean float64) []float64 { return noisySamples(rng, n, mean, 0.03) }
	var steps []report.Step
	for _, n := range []int{1, 2, 4, 8} {
		k := 44
		ps := sweep.Samples{TTFT: noisy(k, 0.1*float64(n)), ITL: noisy(k, 0.006), Decode: noisy(k, 160), E2E: noisy(k, 0.5), Prefill: noisy(k, 10000)}
		if n == 4 {
			ps.TTFT = persistentModes(seed, k, 0.8)
		}
		steps = append(steps, report.Step{Concurrency: n, RequestsSent: k, RequestsOK: k, SuccessRate: 1, Samples: report.NewSamples(ps)})
	}
	r := stepReport(sweep.ModeClosedLoop, steps[0])
	r.Config.ClosedLoopLadder = []int{1, 2, 4, 8}
	r.Scenarios[0].ClosedLoop = steps
	return r
}

// The structure behind a false alarm: at N=4 on the simulated engine a
// pattern of who waits for whose prefill holds for several requests, so a
// rerun's slices can all land in other modes than the base's. Judged alone at
// 95 %, such a figure is flagged; judged as one of the report's 20 figures at
// the family's 95 % (each at 99.75 %), it is not. Fixed seeds: the test
// cannot fail by chance. The same report 20 % slower is flagged in every
// step.
func TestFamilyLevel(t *testing.T) {
	o := DefaultOptions()
	base, rerun := familyReport(54), familyReport(56)
	c := Compare(base, rerun, Options{}).Comparison
	// 20 step figures and the closed-loop ladder's 5 (N=2, 4, 8).
	if c.Method.Figures != 25 || c.Method.FigureLevel != 1-0.05/25 || c.Method.Resamples < 8000 {
		t.Errorf("method %+v; want 25 figures at 99.8 %% each, at least 8000 resamples", c.Method)
	}
	for _, f := range c.Findings() {
		t.Errorf("rerun of the same engine: significant change %s", render.FindingText(f))
	}
	m := c.Step("chat", sweep.ModeClosedLoop, 4).Metric(report.MetricTTFT)
	if m == nil || m.Verdict != report.VerdictNoChange || m.Detectable == nil || *m.Detectable < -m.Change {
		t.Fatalf("N=4 TTFT: %+v; want no detectable change, detectable beyond the %.1f%% seen", m, 100*m.Change)
	}
	t.Logf("N=4 TTFT: change %+.1f%%, family interval %s, detectable ±%.0f%%", 100*m.Change, intervalText(m), 100**m.Detectable)

	// The rule before: this one figure's own 95 % interval excludes zero.
	bg := sliceMedians(base.Scenarios[0].ClosedLoop[2].Samples.TTFT, o.Slices, o.MinSamples)
	ng := sliceMedians(rerun.Scenarios[0].ClosedLoop[2].Samples.TTFT, o.Slices, o.MinSamples)
	iv := medianDiffInterval(bg, ng, o.Resamples, o.Level, o.Seed, "chat/closed_loop/4/ttft")
	if b := sweep.Median(bg); verdict(report.MetricTTFT, (sweep.Median(ng)-b)/b, iv.Lo/b, iv.Hi/b, o.PracticalFloor) == report.VerdictNoChange {
		t.Errorf("the figure's own 95%% interval %+.3f … %+.3f: the case no longer shows the false alarm", iv.Lo/b, iv.Hi/b)
	}

	slower := familyReport(56)
	for i := range slower.Scenarios[0].ClosedLoop {
		s := slower.Scenarios[0].ClosedLoop[i].Samples
		for _, v := range [][]float64{s.TTFT, s.ITL, s.E2E} {
			for j := range v {
				v[j] *= 1.2
			}
		}
		for _, v := range [][]float64{s.Decode, s.Prefill} {
			for j := range v {
				v[j] /= 1.2
			}
		}
	}
	c = Compare(base, slower, Options{}).Comparison
	for _, s := range c.Steps {
		worse := 0
		for _, m := range s.Metrics {
			switch m.Verdict {
			case report.VerdictWorse:
				worse++
			case report.VerdictBetter:
				t.Errorf("20%% slower: N=%d %s called better", s.Concurrency, m.Metric)
			}
		}
		if worse < 4 {
			t.Errorf("20%% slower: N=%d has %d figures flagged worse; want every metric but N=4's modal TTFT", s.Concurrency, worse)
		}
	}
}

// The rate of false alarms on that model, seeded: of 60 rerun pairs, the
// family's rule flags any of the 20 figures in at most 5 % (1 here), fewer
// than the rule before flags the modal figure alone (4 here; 26 of 177
// pairs over more seeds). Under the race detector (make test) the first 20
// pairs: 0 flagged, 1 by the figure alone.
func TestFamilyFalseAlarmRateOnModel(t *testing.T) {
	if testing.Short() {
		t.Skip("60 comparisons")
	}
	o := DefaultOptions()
	total, old, flagged := 0, 0, 0
	seeds := uint64(30)
	if raceEnabled {
		// The race detector makes each comparison about 35 times dearer
		// (61 s for the 60); the counts are seeded, so the first 20 pairs
		// give the same check on fewer figures.
		seeds = 10
	}
	for sb := uint64(1); sb <= seeds; sb++ {
		for sn := sb + 1; sn < sb+3; sn++ {
			b, n := familyReport(sb), familyReport(sn)
			bg := sliceMedians(b.Scenarios[0].ClosedLoop[2].Samples.TTFT, o.Slices, o.MinSamples)
			ng := sliceMedians(n.Scenarios[0].ClosedLoop[2].Samples.TTFT, o.Slices, o.MinSamples)
			iv := medianDiffInterval(bg, ng, o.Resamples, o.Level, o.Seed, "old")
			base := sweep.Median(bg)
			if verdict(report.MetricTTFT, (sweep.Median(ng)-base)/base, iv.Lo/base, iv.Hi/base, o.PracticalFloor) != report.VerdictNoChange {
				old++
			}
			if len(Compare(b, n, Options{}).Comparison.Findings()) > 0 {
				flagged++
			}
			total++
		}
	}
	t.Logf("%d rerun pairs: the figure alone at 95%% flagged in %d (%.1f%%); the family's rule flagged a figure in %d (%.1f%%)",
		total, old, 100*float64(old)/float64(total), flagged, 100*float64(flagged)/float64(total))
	if float64(flagged) > 0.05*float64(total) || old <= flagged {
		t.Errorf("false alarms: %d of %d with the family's rule (want at most 5 %%), %d with the figure's own (the model should show more)", flagged, total, old)
	}
}

// BenchmarkCompareDefaultSweep times Compare on a report shaped like the
// daemon's default sweep: four scenarios, closed-loop N=1 to 32 with 500
// requests kept per step, five metrics, bursts of one round (compared as
// numbers): 120 figures, each interval at 1 − 5 %/120 with 48,000
// resamples. docs/performance.md has the figures.
func BenchmarkCompareDefaultSweep(b *testing.B) {
	build := func(seed uint64) *report.Report {
		rng := rand.New(rand.NewPCG(seed, 5))
		noisy := func(n int, mean float64) []float64 { return noisySamples(rng, n, mean, 0.05) }
		ladder := []int{1, 2, 4, 8, 16, 32}
		r := stepReport(sweep.ModeClosedLoop, report.Step{Concurrency: 1})
		r.Config.ClosedLoopLadder = ladder
		r.Scenarios = nil
		for _, name := range []string{"chatbot", "rag", "agentic", "tool_calling"} {
			sc := report.Scenario{ScenarioSpec: sweep.ScenarioSpec{Name: name, InputTokens: 1024, OutputTokens: 256}}
			for _, n := range ladder {
				k := 500
				ps := sweep.Samples{TTFT: noisy(k, 0.1*float64(n)), ITL: noisy(k, 0.006), Decode: noisy(k, 160), E2E: noisy(k, 2), Prefill: noisy(k, 10000)}
				sc.ClosedLoop = append(sc.ClosedLoop, report.Step{Concurrency: n, RequestsSent: k, RequestsOK: k, SuccessRate: 1, Samples: report.NewSamples(ps)})
			}
			r.Scenarios = append(r.Scenarios, sc)
		}
		return r
	}
	base, cur := build(1), build(2)
	b.ResetTimer()
	for range b.N {
		c := Compare(base, cur, Options{}).Comparison
		if c.Method.Figures != 120 {
			b.Fatalf("%d figures, want 120", c.Method.Figures)
		}
	}
}
