package sweep

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestParseCapacityRule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want CapacityRule
		err  string
	}{
		{in: "goodput >= 95%", want: CapacityRule{Text: "goodput >= 95%", Metric: "goodput", Limit: 0.95, Dir: HigherIsBetter}},
		{in: "Goodput >= 0.9", want: CapacityRule{Text: "goodput >= 90%", Metric: "goodput", Limit: 0.9, Dir: HigherIsBetter}},
		{in: "p99 ttft <= 2s", want: CapacityRule{Text: "p99 ttft <= 2s", Metric: "ttft", Stat: StatP99, Limit: 2, Dir: LowerIsBetter}},
		{in: "median itl <= 50ms", want: CapacityRule{Text: "p50 itl <= 50ms", Metric: "itl", Stat: StatP50, Limit: 0.05, Dir: LowerIsBetter}},
		{in: "p90 decode >= 20", want: CapacityRule{Text: "p90 decode >= 20 tok/s", Metric: "decode", Stat: StatP90, Limit: 20, Dir: HigherIsBetter}},
		{in: "goodput >= 0%", err: "(0%, 100%]"},
		{in: "goodput >= 101%", err: "(0%, 100%]"},
		{in: "goodput <= 95%", err: "goodput takes >="},
		{in: "p99 ttft >= 2s", err: "ttft takes <="},
		{in: "p99 ttft <= 2", err: "positive duration"},
		{in: "p97 ttft <= 2s", err: "expected one of mean"},
		{in: "p99 queue <= 2s", err: `metric "queue"`},
		{in: "ttft <= 2s", err: "<stat> <metric> <op> <value>"},
		{in: "p90 decode >= -3", err: "positive decode speed"},
	} {
		got, err := ParseCapacityRule(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.in) {
				t.Errorf("%q: error %v, want one naming the rule and %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	if r, err := ParseCapacityRules(nil); err != nil || len(r) != 1 || r[0].Text != DefaultCapacityOn {
		t.Errorf("default rules %+v, %v; want %q", r, err, DefaultCapacityOn)
	}
	if _, err := ParseCapacityRules([]string{"p99 ttft <= 2s", "p99 TTFT <= 2000ms"}); err == nil || !strings.Contains(err.Error(), "[1]") {
		t.Errorf("a rule given twice: %v, want an error naming [1]", err)
	}
}

// Capacity on a rule interpolates between the two steps that bracket the
// crossing and names them.
func TestCapacityOnInterpolates(t *testing.T) {
	step := func(n int, good, p99ttft float64) StepResult {
		return StepResult{Concurrency: n, Requests: 100, Succeeded: 100, GoodShare: good, TTFT: Summary{Count: 100, P99: p99ttft}}
	}
	steps := []StepResult{step(1, 1, 0.2), step(2, 0.99, 0.4), step(4, 0.97, 1.0), step(8, 0.91, 3.0), step(16, 0.5, 9)}
	rules, err := ParseCapacityRules([]string{"goodput >= 95%", "p99 ttft <= 2s", "goodput >= 40%", "goodput >= 100%"})
	if err != nil {
		t.Fatal(err)
	}
	got := capacityOn(steps, rules)
	// goodput: 0.97 at 4, 0.91 at 8: crosses 0.95 at 4 + (0.02/0.06)×4 = 5.333.
	// p99 TTFT: 1.0 s at 4, 3.0 s at 8: crosses 2 s at 4 + (1/2)×4 = 6.
	want := []struct {
		n        int
		est      float64
		bound    CapacityBound
		between  []int
		approx   bool
		limitent string
	}{
		{5, 4 + 4.0/3, BoundWithin, []int{4, 8}, true, "goodput"},
		{6, 6, BoundWithin, []int{4, 8}, true, "ttft"},
		{16, 16, BoundAtLeast, nil, false, ""},
		{1, 1, BoundWithin, []int{1, 2}, false, "goodput"},
	}
	for i, w := range want {
		c := got[i]
		if c.N != w.n || math.Abs(c.Estimate-w.est) > 1e-9 || c.Bound != w.bound || !reflect.DeepEqual(c.Between, w.between) ||
			c.Approximate != w.approx || c.LimitedBy != w.limitent {
			t.Errorf("%s: %+v; want N %d (estimate %.4f, %s, between %v, approximate %v, limited by %q)",
				rules[i].Text, c, w.n, w.est, w.bound, w.between, w.approx, w.limitent)
		}
	}
	if s := got[0].String(); s != "~5" {
		t.Errorf("rendered %q, want ~5", s)
	}
	// As report.json keeps it: an estimate and its bracket only when the
	// limit was crossed inside the ladder; a rule nothing measured is left out.
	kept := CapacityOn("chat", steps, rules)
	wantKept := []RuleCapacity{
		{Scenario: "chat", Mode: ModeClosedLoop, Rule: "goodput >= 95%", Bound: Bound{Value: 5, Approximate: true}, Estimate: 4 + 4.0/3, Between: []int{4, 8}, MaxTested: 16},
		{Scenario: "chat", Mode: ModeClosedLoop, Rule: "p99 ttft <= 2s", Bound: Bound{Value: 6, Approximate: true}, Estimate: 6, Between: []int{4, 8}, MaxTested: 16},
		{Scenario: "chat", Mode: ModeClosedLoop, Rule: "goodput >= 40%", Bound: Bound{Value: 16, AtLeast: true}, MaxTested: 16},
		{Scenario: "chat", Mode: ModeClosedLoop, Rule: "goodput >= 100%", Bound: Bound{Value: 1}, Estimate: 1, Between: []int{1, 2}, MaxTested: 16},
	}
	for i := range kept {
		if i < len(wantKept) && math.Abs(kept[i].Estimate-wantKept[i].Estimate) < 1e-9 {
			kept[i].Estimate = wantKept[i].Estimate
		}
	}
	if !reflect.DeepEqual(kept, wantKept) {
		t.Errorf("capacity on, as kept: %+v; want %+v", kept, wantKept)
	}
	if none := CapacityOn("chat", []StepResult{{Concurrency: 1}}, rules); len(none) != 0 {
		t.Errorf("capacity on steps that measured nothing: %+v; want none", none)
	}
}
