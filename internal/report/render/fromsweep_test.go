package render

import (
	"reflect"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// A sweep's goodput and its capacity on rules reach the report, with the
// steps that bracket an interpolated capacity.
func TestFromSweepGoodput(t *testing.T) {
	st := sweep.StepResult{Mode: sweep.ModeClosedLoop, Concurrency: 4, Requests: 10, Succeeded: 10, SuccessRatio: 1, Good: 7, GoodShare: 0.7, GoodPerSecond: 0.35,
		Samples: sweep.Samples{Good: []float64{1, 1, 0, 1, 1, 0, 1, 1, 0, 1}}}
	want := []sweep.RuleCapacity{
		{Scenario: "chat", Mode: sweep.ModeClosedLoop, Rule: "goodput >= 95%", Bound: sweep.Bound{Value: 5, Approximate: true}, Estimate: 5.5, Between: []int{4, 8}, MaxTested: 8},
		{Scenario: "chat", Mode: sweep.ModeClosedLoop, Rule: "p99 ttft <= 2s", Bound: sweep.Bound{Value: 8, AtLeast: true}, MaxTested: 8},
	}
	res := &sweep.Result{
		Settings:  sweep.Settings{CapacityOn: []string{"goodput >= 95%", "p99 ttft <= 2s"}},
		Scenarios: []sweep.ScenarioResult{{ScenarioSpec: sweep.ScenarioSpec{Name: "chat"}, ClosedLoop: []sweep.StepResult{st}, CapacityOn: want}},
	}
	rep := report.FromSweep(res, report.Meta{}, 0, false)
	s := rep.Scenarios[0].ClosedLoop[0]
	if s.Good != 7 || s.GoodShare == nil || *s.GoodShare != 0.7 || s.GoodPerSecond != 0.35 || s.Samples == nil || len(s.Samples.Good) != 10 {
		t.Errorf("step goodput: %d good, share %v, %v/s, samples %+v", s.Good, s.GoodShare, s.GoodPerSecond, s.Samples)
	}
	if !reflect.DeepEqual(rep.Capacity.On, want) || !reflect.DeepEqual(rep.Config.CapacityOn, res.Settings.CapacityOn) {
		t.Errorf("capacity on %+v (config %v); want %+v", rep.Capacity.On, rep.Config.CapacityOn, want)
	}
	h := report.ComputeHeadline(rep)
	if len(h.GoodputCapacity) != 1 || h.GoodputCapacity[0].Value != 5 || !h.GoodputCapacity[0].Approximate {
		t.Errorf("headline goodput capacity %+v; want ~5", h.GoodputCapacity)
	}
	rep.Headline = h
	var md strings.Builder
	if err := RenderMarkdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"| Capacity on goodput | ~5 requests | chat, goodput ≥ 95%; interpolated between N=4 and N=8 (crossing at 5.50) |",
		"| chat | p99 ttft ≤ 2s | 8+ | every N tested meets it |", "| 4 | 10 / 10 | 100% | 70% | 0.35 |"} {
		if !strings.Contains(md.String(), w) {
			t.Errorf("markdown lacks %q:\n%s", w, md.String())
		}
	}
	html := renderHTML(t, rep)
	for _, w := range []string{`data-chart="capacity-on"`, "Capacity on goodput", "interpolated between N=4 and N=8 (crossing at 5.50)", "p99 ttft ≤ 2s", ">good/s</th>"} {
		if !strings.Contains(html, w) {
			t.Errorf("report.html lacks %q", w)
		}
	}
}
