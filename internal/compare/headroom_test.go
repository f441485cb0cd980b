package compare

import (
	"fmt"
	"strings"
	"testing"

	"github.com/slaprobe/slaprobe/internal/gate"
	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// headroomOf is a headroom whose steps at held speed-ups met the rule and
// the others did not, judged as a replay judges it.
func headroomOf(workload string, held, missed []float64) *sweep.Headroom {
	h := &sweep.Headroom{Workload: workload, Rule: "goodput >= 95%", Requests: 100, BaseRate: 8}
	for _, f := range held {
		h.Steps = append(h.Steps, sweep.ReplayStep{Speedup: f, Requests: 100, Good: 100, GoodShare: 1})
	}
	for _, f := range missed {
		h.Steps = append(h.Steps, sweep.ReplayStep{Speedup: f, Requests: 100, Good: 50, GoodShare: 0.5})
	}
	h.Judge(0.95)
	return h
}

// TestHeadroomVerdict: a headroom changes significantly only when the two
// runs' brackets do not overlap (one failed at a speed-up the other held
// at); within them the multiples are shown, not judged.
func TestHeadroomVerdict(t *testing.T) {
	fast := headroomOf("steady", []float64{1, 2, 3}, []float64{3.5, 4}) // [×3, ×3.5]
	for _, c := range []struct {
		name      string
		base, cur *sweep.Headroom
		verdict   string
		text      string
	}{
		{"30 % slower: failed at ×3, where the base held", fast, headroomOf("steady", []float64{1, 2, 2.5}, []float64{3, 4}), report.VerdictWorse, "% less (significant"},
		{"the same bracket", fast, headroomOf("steady", []float64{1, 2, 3}, []float64{3.5, 4}), report.VerdictNoChange, "no detectable change"},
		{"overlapping brackets", fast, headroomOf("steady", []float64{1, 2}, []float64{3.5, 4}), report.VerdictNoChange, "no detectable change"},
		{"faster", fast, headroomOf("steady", []float64{1, 2, 3, 3.5, 4}, nil), report.VerdictBetter, "% more (significant"},
		{"below the smallest tested", fast, headroomOf("steady", nil, []float64{0.5, 1}), report.VerdictWorse, "<0.5×"},
		{"another workload", fast, headroomOf("bursty", []float64{1}, []float64{2}), report.VerdictUnknown, "workloads differ"},
		{"nothing measured", fast, &sweep.Headroom{Workload: "steady", Rule: "goodput >= 95%", Bound: sweep.BoundUnknown}, report.VerdictUnknown, "measured no step"},
	} {
		got := Headroom(c.base, c.cur)
		text := got.Verdict + ": " + got.Resolution + " " + got.Note + " " + got.NewText
		if got.Verdict != c.verdict || !strings.Contains(text+" "+headroomLine(got), c.text) {
			t.Errorf("%s: %s (%s); want %s saying %q", c.name, got.Verdict, text+" "+headroomLine(got), c.verdict, c.text)
		}
	}
}

func headroomLine(h *report.HeadroomChange) string {
	var b strings.Builder
	WriteSummary(&b, &report.Comparison{Headroom: h, BaseLabel: "base", Confidence: true})
	return b.String()
}

// TestHeadroomGate: compare on two headroom reports fills the comparison,
// and --fail-on fails past the stated drop only: headroom:<percent> on a
// significant drop larger than it, capacity and any on any significant
// drop; a headroom rule on runs without a headroom has no verdict.
func TestHeadroomGate(t *testing.T) {
	base := &report.Report{SchemaVersion: report.SchemaVersion, Headroom: headroomOf("steady", []float64{1, 2, 3}, []float64{3.5, 4})}
	slower := &report.Report{SchemaVersion: report.SchemaVersion, Headroom: headroomOf("steady", []float64{1, 2, 2.5}, []float64{3, 4})}
	c := Compare(base, slower, Options{BaseLabel: "base"}).Comparison
	itself := Compare(base, base, Options{BaseLabel: "base"}).Comparison
	drop := -100 * c.Headroom.Change
	t.Logf("%s", headroomLine(c.Headroom))
	rule := func(s string) gate.Rules {
		var rs gate.Rules
		if err := rs.Set(s); err != nil {
			t.Fatal(err)
		}
		return rs
	}
	for _, g := range []struct {
		c     *report.Comparison
		rules string
		exit  int
	}{
		{c, "headroom:10", gate.ExitRegression},
		{c, fmt.Sprintf("headroom:%.0f", drop+1), 0}, // a drop smaller than the one stated
		{c, "capacity", gate.ExitRegression},
		{c, "any", gate.ExitRegression},
		{c, "metric:ttft", 0},
		{itself, "headroom:10", 0},
		{itself, "any", 0},
		{&report.Comparison{}, "headroom:10", gate.ExitNoVerdict},
	} {
		res := gate.Evaluate(g.c, rule(g.rules), gate.UnknownFail)
		if res.ExitCode != g.exit {
			t.Errorf("--fail-on=%s: exit %d (%s %v); want %d", g.rules, res.ExitCode, res.Summary, res.Reasons, g.exit)
		}
	}
	if _, err := gate.ParseRule("headroom"); err == nil {
		t.Error("headroom without a percent parsed")
	}
}
