package compare

import (
	"math"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/report/render"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// goodFlags is n requests of which share are good, spread evenly, the
// pattern shifted by off.
func goodFlags(n int, share, off float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		x := float64(i) + off
		v[i] = math.Floor((x+1)*share) - math.Floor(x*share)
	}
	return v
}

func goodStep(n int, good []float64, rounds []float64) report.Step {
	var sum float64
	for _, g := range good {
		sum += g
	}
	st := report.Step{Concurrency: n, RequestsSent: len(good), RequestsOK: len(good), SuccessRate: 1,
		Good: int(sum), GoodShare: report.Float(sum / float64(len(good))), Samples: &report.Samples{Good: good}}
	if rounds != nil {
		st.Samples.RoundMedians = &report.Samples{Good: rounds}
	}
	return st
}

// Compare judges goodput share like any figure: on the shares of slices of
// a closed loop and of burst rounds, with the rank interval's rules at
// small sizes.
func TestGoodShareVerdicts(t *testing.T) {
	eight := func(v ...float64) []float64 { return v }
	for _, tc := range []struct {
		name      string
		mode      sweep.Mode
		base, cur report.Step
		verdict   string
		note      string
		needed    bool // no verdict: the note asks for more
	}{
		{"closed loop, same share, pattern shifted", sweep.ModeClosedLoop,
			goodStep(4, goodFlags(80, 0.95, 0), nil), goodStep(4, goodFlags(80, 0.95, 0.5), nil), report.VerdictNoChange, "8 and 8 slices", false},
		{"closed loop, half as many good", sweep.ModeClosedLoop,
			goodStep(4, goodFlags(80, 0.95, 0), nil), goodStep(4, goodFlags(80, 0.5, 0), nil), report.VerdictWorse, "8 and 8 slices", false},
		{"closed loop, from 3 in 4 to all good", sweep.ModeClosedLoop,
			goodStep(4, goodFlags(80, 0.75, 0), nil), goodStep(4, goodFlags(80, 1, 0), nil), report.VerdictBetter, "8 and 8 slices", false},
		{"N=1 is judged on slices too", sweep.ModeClosedLoop,
			goodStep(1, goodFlags(40, 1, 0), nil), goodStep(1, goodFlags(40, 0.6, 0), nil), report.VerdictWorse, "8 and 8 slices", false},
		{"closed loop, 10% fewer good: within the slices' spread? no: every slice lower", sweep.ModeClosedLoop,
			goodStep(4, goodFlags(80, 1, 0), nil), goodStep(4, goodFlags(80, 0.9, 0), nil), report.VerdictWorse, "8 and 8 slices", false},
		{"closed loop, too few requests for three slices", sweep.ModeClosedLoop,
			goodStep(4, goodFlags(12, 1, 0), nil), goodStep(4, goodFlags(12, 0.5, 0), nil), report.VerdictUnknown, "too few", true},
		{"burst, 8 rounds each, half the good", sweep.ModeBurst,
			goodStep(8, goodFlags(64, 1, 0), eight(1, 1, 1, 1, 0.875, 1, 1, 1)), goodStep(8, goodFlags(64, 0.5, 0), eight(0.5, 0.5, 0.625, 0.375, 0.5, 0.5, 0.5, 0.5)),
			report.VerdictWorse, "8 and 8 burst rounds", false},
		{"burst, 2 rounds each", sweep.ModeBurst,
			goodStep(8, goodFlags(16, 1, 0), eight(1, 1)), goodStep(8, goodFlags(16, 0.5, 0), eight(0.5, 0.5)), report.VerdictUnknown, "burst.repeat", true},
		{"burst of one round", sweep.ModeBurst,
			goodStep(8, goodFlags(8, 1, 0), nil), goodStep(8, goodFlags(8, 0.5, 0), nil), report.VerdictUnknown, "burst.repeat", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Compare(stepReport(tc.mode, tc.base), stepReport(tc.mode, tc.cur), Options{}).Comparison
			m := c.Step("chat", tc.mode, tc.base.Concurrency).Metric(report.MetricGoodShare)
			if m == nil {
				t.Fatal("no goodput share change for the step")
			}
			if m.Base != *tc.base.GoodShare || m.New != *tc.cur.GoodShare {
				t.Errorf("base %v, new %v; want the steps' shares %v, %v", m.Base, m.New, *tc.base.GoodShare, *tc.cur.GoodShare)
			}
			if m.Verdict != tc.verdict {
				t.Errorf("verdict %q (change %+.3f, interval %s); want %q", m.Verdict, m.Change, intervalText(m), tc.verdict)
			}
			if !strings.Contains(m.Note, tc.note) || (m.NeededPerRun > 0) != tc.needed {
				t.Errorf("note %q, needed per run %d; want it to say %q", m.Note, m.NeededPerRun, tc.note)
			}
		})
	}
	// A report written before goodput was kept has no such figure.
	old := goodStep(4, goodFlags(80, 1, 0), nil)
	old.GoodShare, old.Samples = nil, nil
	c := Compare(stepReport(sweep.ModeClosedLoop, old), stepReport(sweep.ModeClosedLoop, goodStep(4, goodFlags(80, 0.5, 0), nil)), Options{}).Comparison
	if m := c.Step("chat", sweep.ModeClosedLoop, 4).Metric(report.MetricGoodShare); m != nil {
		t.Errorf("a base without goodput: %+v; want no figure", m)
	}
}

// Capacity on a rule is compared per scenario and rule, at the ladder's
// resolution, and a finding names the rule.
func TestCapacityOnCompared(t *testing.T) {
	rep := func(good int) *report.Report {
		r := synthetic(1, 1, 0.05, []int{1, 2, 4, 8}, []int{1})
		r.Capacity.On = []sweep.RuleCapacity{
			{Scenario: "chat", Mode: sweep.ModeClosedLoop, Rule: "goodput >= 95%", Bound: sweep.Bound{Value: good}, MaxTested: 8},
			{Scenario: "chat", Mode: sweep.ModeClosedLoop, Rule: "p99 ttft <= 2s", Bound: sweep.Bound{Value: 8, AtLeast: true}, MaxTested: 8},
		}
		return r
	}
	c := Compare(rep(8), rep(2), Options{}).Comparison
	g := c.CapacityOnRule(report.CapacityOn, "chat", "goodput >= 95%")
	p := c.CapacityOnRule(report.CapacityOn, "chat", "p99 ttft <= 2s")
	if g == nil || g.Verdict != report.VerdictWorse || g.Change != -0.75 {
		t.Fatalf("goodput capacity 8 → 2: %+v; want worse by 75%%", g)
	}
	if p == nil || p.Verdict != report.VerdictNoChange {
		t.Errorf("p99 capacity 8+ → 8+: %+v; want no change", p)
	}
	found := false
	for _, f := range c.Findings() {
		if f.Capacity != nil && f.Capacity.Kind == report.CapacityOn {
			found = strings.Contains(render.FindingText(f), "capacity on goodput ≥ 95%")
		}
	}
	if !found {
		t.Errorf("no regression names the goodput capacity: %+v", c.Findings())
	}
}
