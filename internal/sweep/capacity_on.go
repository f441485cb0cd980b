package sweep

// This file holds capacity asked on a rule (sweep.capacity_on): on the
// share of good requests (goodput), or on one statistic of one metric.

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// DefaultCapacityOn is the rule a sweep's capacity is asked on when none is
// configured: at least 95 % of a step's requests are good (succeeded and
// met every threshold of the scenario at once, prober.Thresholds.MetBy).
const DefaultCapacityOn = "goodput >= 95%"

// MaxCapacityRules bounds sweep.capacity_on.
const MaxCapacityRules = 8

// CapacityRule is one limit capacity is asked on: "goodput >= 95%" (the
// share of good requests of a step), or "<stat> <metric> <op> <value>"
// with stat one of mean, p50 (median), p90, p95, p99; metric ttft, itl or
// e2e with "<=" and a duration ("p99 ttft <= 2s"), or decode with ">=" and
// tokens per second ("p90 decode >= 20"; the p90 of decode speed is the
// speed 90 % of requests reach, its 10th percentile).
type CapacityRule struct {
	Text   string    // normalized: "goodput >= 95%", "p99 ttft <= 2s"
	Metric string    // "goodput", "ttft", "itl", "e2e", "decode"
	Stat   Stat      // statistic of Metric; empty for goodput
	Limit  float64   // share 0..1 for goodput, seconds, or tokens/s
	Dir    Direction // LowerIsBetter for ttft, itl, e2e
}

// ParseCapacityRule reads one rule; its error says what was expected.
func ParseCapacityRule(s string) (CapacityRule, error) {
	f := strings.Fields(strings.ToLower(s))
	if len(f) == 3 && f[0] == "goodput" {
		if f[1] != ">=" {
			return CapacityRule{}, fmt.Errorf("rule %q: goodput takes >=, e.g. %q", s, DefaultCapacityOn)
		}
		v, pct := strings.CutSuffix(f[2], "%")
		x, err := strconv.ParseFloat(v, 64)
		if err == nil && pct {
			x /= 100
		}
		if err != nil || !(x > 0 && x <= 1) {
			return CapacityRule{}, fmt.Errorf("rule %q: expected a share of good requests in (0%%, 100%%], e.g. 95%%", s)
		}
		return CapacityRule{Text: "goodput >= " + strconv.FormatFloat(100*x, 'g', 6, 64) + "%", Metric: "goodput", Limit: x, Dir: HigherIsBetter}, nil
	}
	if len(f) != 4 {
		return CapacityRule{}, fmt.Errorf("rule %q: expected \"goodput >= 95%%\" or \"<stat> <metric> <op> <value>\", e.g. \"p99 ttft <= 2s\"", s)
	}
	st, err := ParseStat(f[0])
	if err != nil {
		return CapacityRule{}, fmt.Errorf("rule %q: %w", s, err)
	}
	r := CapacityRule{Metric: f[1], Stat: st}
	switch f[1] {
	case "ttft", "itl", "e2e":
		if f[2] != "<=" {
			return CapacityRule{}, fmt.Errorf("rule %q: %s takes <=", s, f[1])
		}
		d, err := time.ParseDuration(f[3])
		if err != nil || d <= 0 {
			return CapacityRule{}, fmt.Errorf("rule %q: expected a positive duration such as 2s or 50ms, got %q", s, f[3])
		}
		r.Limit, r.Dir = d.Seconds(), LowerIsBetter
		r.Text = fmt.Sprintf("%s %s <= %s", st, f[1], d)
	case "decode":
		if f[2] != ">=" {
			return CapacityRule{}, fmt.Errorf("rule %q: decode takes >=", s)
		}
		x, err := strconv.ParseFloat(strings.TrimSuffix(f[3], "tok/s"), 64)
		if err != nil || !(x > 0) || math.IsInf(x, 0) {
			return CapacityRule{}, fmt.Errorf("rule %q: expected a positive decode speed in tokens per second, got %q", s, f[3])
		}
		r.Limit, r.Dir = x, HigherIsBetter
		r.Text = fmt.Sprintf("%s decode >= %s tok/s", st, strconv.FormatFloat(x, 'g', 6, 64))
	default:
		return CapacityRule{}, fmt.Errorf("rule %q: metric %q: expected goodput, ttft, itl, e2e or decode", s, f[1])
	}
	return r, nil
}

// ParseCapacityRules reads sweep.capacity_on: the default rule when rules
// is empty; at most MaxCapacityRules, none twice.
func ParseCapacityRules(rules []string) ([]CapacityRule, error) {
	if len(rules) == 0 {
		rules = []string{DefaultCapacityOn}
	}
	if len(rules) > MaxCapacityRules {
		return nil, fmt.Errorf("%d rules: expected at most %d", len(rules), MaxCapacityRules)
	}
	out := make([]CapacityRule, 0, len(rules))
	seen := map[string]bool{}
	for i, s := range rules {
		r, err := ParseCapacityRule(s)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		if seen[r.Text] {
			return nil, fmt.Errorf("[%d]: rule %q given twice", i, s)
		}
		seen[r.Text] = true
		out = append(out, r)
	}
	return out, nil
}

// value is the figure of s the rule judges; NaN when s measured nothing,
// and a failing value when no request of s succeeded.
func (r CapacityRule) value(s *StepResult) float64 {
	if !s.Measured() {
		return math.NaN()
	}
	if r.Metric == "goodput" {
		return s.GoodShare
	}
	if s.Succeeded == 0 {
		if r.Dir == HigherIsBetter {
			return math.Inf(-1)
		}
		return math.Inf(1)
	}
	switch r.Metric {
	case "ttft":
		return s.TTFT.Worse(r.Stat)
	case "itl":
		return s.ITL.Worse(r.Stat)
	case "e2e":
		return s.E2E.Worse(r.Stat)
	}
	return s.Decode.WorseLow(r.Stat)
}

// RuleCapacity is one scenario's capacity on one rule ("goodput >= 95%",
// "p99 ttft <= 2s"): the largest N whose step meets it, interpolated
// between the measured steps that bracket the crossing. report.json keeps
// it as is (report.Capacity.On).
type RuleCapacity struct {
	Scenario string `json:"scenario"`
	Mode     Mode   `json:"mode"`
	Rule     string `json:"rule"`
	Bound
	// Estimate is the unrounded crossing of the rule's limit, interpolated
	// linearly between the two measured steps of Between (the last that
	// met it and the first that did not); both are absent when the limit
	// was not crossed inside the measured range.
	Estimate  float64 `json:"estimate,omitempty"`
	Between   []int   `json:"between,omitempty"`
	MaxTested int     `json:"max_tested"`
}

// CapacityOn is the capacity of a scenario's closed-loop steps (drained)
// on each rule; a rule none of the steps measured is left out.
func CapacityOn(scenario string, steps []StepResult, rules []CapacityRule) []RuleCapacity {
	var out []RuleCapacity
	for i, c := range capacityOn(steps, rules) {
		if c.Bound == BoundUnknown {
			continue
		}
		rc := RuleCapacity{Scenario: scenario, Mode: ModeClosedLoop, Rule: rules[i].Text, Bound: c.Reported(), MaxTested: c.MaxTested}
		if c.Bound == BoundWithin {
			rc.Estimate, rc.Between = c.Estimate, c.Between
		}
		out = append(out, rc)
	}
	return out
}

// capacityOn is the capacity of steps (one mode) on each rule, in order.
func capacityOn(steps []StepResult, rules []CapacityRule) []Capacity {
	out := make([]Capacity, 0, len(rules))
	for _, r := range rules {
		pts := make([]CapacityPoint, 0, len(steps))
		for i := range steps {
			pts = append(pts, CapacityPoint{N: steps[i].Concurrency, Value: r.value(&steps[i])})
		}
		c := MaxWithin(pts, r.Limit, r.Dir)
		if c.Bound == BoundWithin || c.Bound == BoundBelow {
			c.LimitedBy = r.Metric
		}
		out = append(out, c)
	}
	return out
}
