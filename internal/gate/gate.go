// Package gate turns a comparison of two benchmark reports into a CI
// verdict: `slaprobe compare --fail-on=…` and `slaprobe bench
// --baseline=… --fail-on=…`. A rule names the kind of regression that
// fails the gate (any, one metric, capacity, goodput share, headroom); Evaluate finds
// the figures a rule covers that the comparison called significantly worse
// (the reasons) and those it could give no verdict (too few rounds or
// slices, no raw samples, a step measured in one run only), which fail the
// gate or not as --fail-on-unknown says. The result is printed and written
// as JSON for the pipeline.
package gate

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/slaprobe/slaprobe/internal/report"
)

// Exit codes of a gate; the other codes (0, 1, 2, 130) are internal/bench's,
// and cmd/slaprobe's exitcodes.go lists them all.
const (
	// ExitRegression: a significant regression of a kind --fail-on names
	// was found.
	ExitRegression = 3
	// ExitNoVerdict: no regression was found, but figures --fail-on covers
	// got no verdict (too few rounds or slices, no samples, steps in one
	// run only) and --fail-on-unknown=fail (the default).
	ExitNoVerdict = 4
)

// Kinds of rule.
const (
	KindAny      = "any"
	KindMetric   = "metric"
	KindCapacity = "capacity"
	KindGoodput  = "goodput"
	KindHeadroom = "headroom"
)

// MetricGoodputShare is the name a comparison gives the goodput share
// figure (the share of requests that met every threshold of their
// scenario, 0 to 1) in its step metrics: report.MetricGoodShare. A goodput
// rule reads it; runs whose comparison has none (reports written before
// sweeps kept goodput) are "no goodput figure in these runs".
const MetricGoodputShare = report.MetricGoodShare

// Unknown policies (--fail-on-unknown).
const (
	UnknownFail = "fail"
	UnknownPass = "pass"
)

// gatedMetrics are the step metrics a metric rule may name: those a
// comparison gives a verdict. System throughput is one number per step,
// compared without confidence, so no rule can be on it.
var gatedMetrics = []string{report.MetricTTFT, report.MetricITL, report.MetricDecode, report.MetricE2E, report.MetricPrefill}

// Rule is one --fail-on kind.
type Rule struct {
	Kind string
	// Metric is the metric of a metric rule.
	Metric string
	// Points is a goodput rule's tolerated drop of the goodput share, in
	// percentage points, or a headroom rule's of the headroom, in percent:
	// the gate fails on a significant drop larger than it.
	Points float64
}

func (r Rule) String() string {
	switch r.Kind {
	case KindMetric:
		return KindMetric + ":" + r.Metric
	case KindGoodput, KindHeadroom:
		return r.Kind + ":" + strconv.FormatFloat(r.Points, 'g', -1, 64)
	}
	return r.Kind
}

const expected = "any, capacity, metric:<" + "ttft|itl|decode|e2e|prefill>, goodput:<percentage points, 0 to 100>, or headroom:<percent, 0 to 100>"

// ParseRule reads one kind: "any", "capacity", "metric:ttft", "goodput:5".
func ParseRule(s string) (Rule, error) {
	s = strings.TrimSpace(s)
	kind, arg, hasArg := strings.Cut(s, ":")
	kind = strings.ToLower(strings.TrimSpace(kind))
	arg = strings.TrimSpace(arg)
	bad := func(why string) (Rule, error) {
		return Rule{}, fmt.Errorf("%q: %s; expected %s", s, why, expected)
	}
	switch kind {
	case KindAny, KindCapacity:
		if hasArg {
			return bad(kind + " takes no argument")
		}
		return Rule{Kind: kind}, nil
	case KindMetric:
		m := strings.ToLower(arg)
		if !slices.Contains(gatedMetrics, m) {
			return bad(fmt.Sprintf("no metric %q a comparison gives a verdict", arg))
		}
		return Rule{Kind: KindMetric, Metric: m}, nil
	case KindGoodput:
		p, err := strconv.ParseFloat(strings.TrimSuffix(arg, "%"), 64)
		if !hasArg || err != nil || p < 0 || p > 100 {
			return bad("goodput needs the tolerated drop in percentage points")
		}
		return Rule{Kind: KindGoodput, Points: p}, nil
	case KindHeadroom:
		p, err := strconv.ParseFloat(strings.TrimSuffix(arg, "%"), 64)
		if !hasArg || err != nil || p < 0 || p > 100 {
			return bad("headroom needs the tolerated drop in percent")
		}
		return Rule{Kind: KindHeadroom, Points: p}, nil
	case "":
		return bad("empty")
	}
	return bad("unknown kind")
}

// Policy is --fail-on-unknown, a kingpin.Value: UnknownFail or
// UnknownPass.
type Policy string

// Set reads fail or pass.
func (p *Policy) Set(v string) error {
	switch v = strings.ToLower(strings.TrimSpace(v)); v {
	case UnknownFail, UnknownPass:
		*p = Policy(v)
		return nil
	}
	return fmt.Errorf("--fail-on-unknown=%q: expected fail (a figure without a verdict fails the gate, exit %d) or pass", v, ExitNoVerdict)
}

func (p *Policy) String() string { return string(*p) }

// Rules are the --fail-on kinds: comma-separated, the flag repeatable. It
// is a kingpin.Value, so a bad kind is a usage error (exit 2).
type Rules []Rule

// Set adds the comma-separated kinds of one --fail-on.
func (rs *Rules) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		r, err := ParseRule(part)
		if err != nil {
			return fmt.Errorf("--fail-on=%w", err)
		}
		if !slices.Contains(*rs, r) {
			*rs = append(*rs, r)
		}
	}
	return nil
}

func (rs *Rules) String() string {
	s := make([]string, len(*rs))
	for i, r := range *rs {
		s[i] = r.String()
	}
	return strings.Join(s, ",")
}

// IsCumulative makes the flag repeatable.
func (rs *Rules) IsCumulative() bool { return true }

// covers reports whether the rule is about a step metric.
func (r Rule) covers(metric string) bool {
	switch r.Kind {
	case KindAny:
		return slices.Contains(gatedMetrics, metric) || metric == MetricGoodputShare
	case KindMetric:
		return metric == r.Metric
	case KindGoodput:
		return metric == MetricGoodputShare
	}
	return false
}

// Figure is one figure of the comparison a rule covers.
type Figure struct {
	// Rules are the --fail-on kinds that cover the figure.
	Rules       []string `json:"rules"`
	Figure      string   `json:"figure"` // e.g. "short_chat closed_loop N=1 ttft"
	Scenario    string   `json:"scenario"`
	Mode        string   `json:"mode,omitempty"`
	Concurrency int      `json:"concurrency,omitempty"`
	Metric      string   `json:"metric"` // a step metric, or max_safe_queue / use_case
	Base        *float64 `json:"base,omitempty"`
	New         *float64 `json:"new,omitempty"`
	Change      *float64 `json:"change_ratio,omitempty"`
	// Low and High bound the interval of the change, relative to Base, at
	// FigureLevel (the family's level shared by the comparison's figures).
	Low         *float64 `json:"low_ratio,omitempty"`
	High        *float64 `json:"high_ratio,omitempty"`
	FigureLevel float64  `json:"figure_level,omitempty"`
	BaseSamples int      `json:"base_samples,omitempty"`
	NewSamples  int      `json:"new_samples,omitempty"`
	// Why says why the figure counts (a reason) or why it has no verdict.
	Why string `json:"why"`
	// NeededPerRun: for a figure with too few values, how many per run
	// (rounds, slices, requests) would give it a verdict.
	NeededPerRun int `json:"needed_per_run,omitempty"`
}

// Result is the gate's verdict, written with --verdict-file.
type Result struct {
	// Result is "pass" or "fail".
	Result   string `json:"result"`
	ExitCode int    `json:"exit_code"`
	// Summary is the line printed.
	Summary       string   `json:"summary"`
	FailOn        []string `json:"fail_on"`
	FailOnUnknown string   `json:"fail_on_unknown"`
	// Confidence is false when either report kept no raw samples: no
	// figure then has a verdict.
	Confidence bool    `json:"confidence"`
	Level      float64 `json:"confidence_level"`
	// Reasons are the significant regressions the rules name: any one
	// fails the gate.
	Reasons []Figure `json:"reasons"`
	// NoVerdict are the figures the rules cover that got no verdict.
	NoVerdict []Figure `json:"no_verdict"`
}

// Evaluate applies rules to a comparison. unknown is UnknownFail or
// UnknownPass (anything else is UnknownFail).
func Evaluate(c *report.Comparison, rules Rules, unknown string) Result {
	if unknown != UnknownPass {
		unknown = UnknownFail
	}
	res := Result{FailOnUnknown: unknown, Reasons: []Figure{}, NoVerdict: []Figure{}, FailOn: []string{}}
	for _, r := range rules {
		res.FailOn = append(res.FailOn, r.String())
	}
	if c == nil {
		c = &report.Comparison{}
	}
	res.Confidence, res.Level = c.Confidence, c.Method.Level
	goodputSeen := false
	for _, s := range c.Steps {
		name := fmt.Sprintf("%s %s N=%d", s.Scenario, s.Mode, s.Concurrency)
		if s.Concurrency == 0 {
			name = fmt.Sprintf("%s %s ladder", s.Scenario, s.Mode) // compare's figure of every N at once
		}
		if s.Presence != report.InBoth || s.NotMeasured != "" {
			// A step the other run lacks, or where one run measured
			// nothing: every rule on step metrics covers it.
			var names []string
			for _, r := range rules {
				if r.Kind == KindAny || r.Kind == KindMetric {
					names = append(names, r.String())
				}
			}
			if len(names) == 0 || s.Presence == report.OnlyInNew {
				continue // a step only the new run has regressed nothing
			}
			why := "in the base run only"
			if s.NotMeasured != "" {
				why = "measured nothing in " + map[string]string{"both": "either run", "base": "the base run", "new": "the new run"}[s.NotMeasured]
			}
			res.NoVerdict = append(res.NoVerdict, Figure{Rules: names, Figure: name, Scenario: s.Scenario, Mode: string(s.Mode),
				Concurrency: s.Concurrency, Metric: "step", Why: why})
			continue
		}
		for _, m := range s.Metrics {
			if m.Metric == MetricGoodputShare {
				goodputSeen = true
			}
			var names []string
			counts := false
			for _, r := range rules {
				if !r.covers(m.Metric) {
					continue
				}
				names = append(names, r.String())
				if m.Verdict == report.VerdictWorse && (r.Kind != KindGoodput || 100*(m.Base-m.New) > r.Points) {
					counts = true
				}
			}
			if len(names) == 0 {
				continue
			}
			f := stepFigure(name+" "+m.Metric, s, m, names, c.Method.FigureLevel)
			switch {
			case counts:
				f.Why = fmt.Sprintf("significantly worse: %+.1f%%, interval [%+.1f%%, %+.1f%%] excludes zero at %s and the change passes the %.0f%% floor",
					100*m.Change, 100*deref(m.Low), 100*deref(m.High), levelText(c.Method.FigureLevel), 100*c.Method.PracticalFloor)
				if m.Metric == MetricGoodputShare {
					f.Why += fmt.Sprintf("; goodput share down %.1f percentage points", 100*(m.Base-m.New))
				}
				res.Reasons = append(res.Reasons, f)
			case m.Verdict == report.VerdictUnknown:
				f.Why = "no verdict"
				if m.Note != "" {
					f.Why += ": " + m.Note
				}
				f.NeededPerRun = m.NeededPerRun
				res.NoVerdict = append(res.NoVerdict, f)
			}
		}
	}
	for _, r := range rules {
		if r.Kind == KindGoodput && !goodputSeen {
			res.NoVerdict = append(res.NoVerdict, Figure{Rules: []string{r.String()}, Figure: "goodput share", Metric: MetricGoodputShare,
				Why: "no goodput figure in these runs"})
		}
	}
	res.headroom(c.Headroom, rules)
	for i := range c.Capacity {
		cc := &c.Capacity[i]
		var names []string
		for _, r := range rules {
			if r.Kind == KindAny || r.Kind == KindCapacity {
				names = append(names, r.String())
			}
		}
		if len(names) == 0 || cc.Presence == report.OnlyInNew {
			continue
		}
		f := Figure{Rules: names, Figure: cc.Scenario + " " + cc.Kind, Scenario: cc.Scenario, Metric: cc.Kind}
		if cc.Base != nil {
			f.Base = ptr(float64(cc.Base.Value))
		}
		if cc.New != nil {
			f.New = ptr(float64(cc.New.Value))
		}
		if cc.Presence == report.InBoth {
			f.Change = ptr(cc.Change)
		}
		switch {
		case cc.Verdict == report.VerdictWorse:
			f.Why = "capacity down past a measured N (" + cc.Resolution + ")"
			res.Reasons = append(res.Reasons, f)
		case cc.Verdict == report.VerdictUnknown:
			f.Why = "no verdict"
			if cc.Presence == report.OnlyInBase {
				f.Why += ": in the base run only"
			}
			if cc.Note != "" {
				f.Why += ": " + cc.Note
			}
			res.NoVerdict = append(res.NoVerdict, f)
		}
	}
	switch {
	case len(res.Reasons) > 0:
		res.Result, res.ExitCode = "fail", ExitRegression
		res.Summary = fmt.Sprintf("gate failed: %d significant regression(s) named by --fail-on=%s", len(res.Reasons), strings.Join(res.FailOn, ","))
	case len(res.NoVerdict) > 0 && unknown == UnknownFail:
		res.Result, res.ExitCode = "fail", ExitNoVerdict
		res.Summary = fmt.Sprintf("gate failed closed: no regression found, but %d figure(s) --fail-on=%s covers got no verdict (--fail-on-unknown=fail)",
			len(res.NoVerdict), strings.Join(res.FailOn, ","))
	case len(res.NoVerdict) > 0:
		res.Result = "pass"
		res.Summary = fmt.Sprintf("gate passed open: no regression found, but %d figure(s) --fail-on=%s covers got no verdict (--fail-on-unknown=pass)",
			len(res.NoVerdict), strings.Join(res.FailOn, ","))
	default:
		res.Result = "pass"
		res.Summary = fmt.Sprintf("gate passed: no significant regression named by --fail-on=%s, and every figure it covers got a verdict", strings.Join(res.FailOn, ","))
	}
	return res
}

// headroom adds a headroom comparison's figure: any and capacity count a
// significant drop, headroom:<percent> one larger than the percent.
func (res *Result) headroom(h *report.HeadroomChange, rules Rules) {
	var names []string
	counts := false
	for _, r := range rules {
		switch {
		case r.Kind == KindHeadroom && h == nil:
			res.NoVerdict = append(res.NoVerdict, Figure{Rules: []string{r.String()}, Figure: "headroom", Metric: report.CapacityHeadroom,
				Why: "no headroom in these runs (reports of slaprobe headroom have one)"})
		case h == nil:
		case r.Kind == KindAny || r.Kind == KindCapacity || r.Kind == KindHeadroom:
			names = append(names, r.String())
			if h.Verdict == report.VerdictWorse && (r.Kind != KindHeadroom || -100*h.Change > r.Points) {
				counts = true
			}
		}
	}
	if len(names) == 0 {
		return
	}
	f := Figure{Rules: names, Figure: h.Workload + " headroom", Scenario: h.Workload, Metric: report.CapacityHeadroom,
		Base: ptr(h.Base), New: ptr(h.New), Change: ptr(h.Change)}
	switch {
	case counts:
		f.Why = fmt.Sprintf("headroom %s → %s (%+.0f%%): down past a measured speed-up (%s)", h.BaseText, h.NewText, 100*h.Change, h.Resolution)
		res.Reasons = append(res.Reasons, f)
	case h.Verdict == report.VerdictUnknown:
		f.Why = "no verdict: " + h.Note
		res.NoVerdict = append(res.NoVerdict, f)
	}
}

func stepFigure(name string, s report.StepChange, m report.MetricChange, rules []string, level float64) Figure {
	f := Figure{Rules: rules, Figure: name, Scenario: s.Scenario, Mode: string(s.Mode), Concurrency: s.Concurrency, Metric: m.Metric,
		Base: ptr(m.Base), New: ptr(m.New), Change: ptr(m.Change), Low: m.Low, High: m.High,
		BaseSamples: m.BaseSamples, NewSamples: m.NewSamples}
	if m.Low != nil {
		f.FigureLevel = level
	}
	return f
}

func ptr(v float64) *float64 { return &v }

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func levelText(v float64) string { return strconv.FormatFloat(100*v, 'g', 4, 64) + "%" }

// listed is how many figures of each list the text prints; the verdict
// file has them all.
const listed = 10

// WriteText prints the summary, the reasons and the figures without a
// verdict (the first few of each, and how many more).
func (r Result) WriteText(w io.Writer) {
	fmt.Fprintln(w, r.Summary)
	list := func(title string, fs []Figure) {
		if len(fs) == 0 {
			return
		}
		fmt.Fprintf(w, "  %s (%d):\n", title, len(fs))
		for i, f := range fs {
			if i == listed {
				fmt.Fprintf(w, "    … and %d more (all in --verdict-file)\n", len(fs)-listed)
				break
			}
			fmt.Fprintf(w, "    %s [%s]: %s\n", f.Figure, strings.Join(f.Rules, ","), f.Why)
		}
	}
	list("regressions", r.Reasons)
	list("figures without a verdict", r.NoVerdict)
}

// WriteFile writes the result as indented JSON.
func (r Result) WriteFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Options are a command's gate flags.
type Options struct {
	Rules Rules
	// Unknown is --fail-on-unknown: UnknownFail (default, also when empty)
	// or UnknownPass.
	Unknown Policy
	// VerdictFile is where the JSON verdict goes; empty: nowhere.
	VerdictFile string
	// Interrupted, when not zero, is the exit code of a run that did not
	// finish (bench's 130): it replaces the gate's, and the result is
	// "interrupted", since a partial run is no verdict.
	Interrupted int
}

// Enabled reports whether the command has a gate to apply.
func (o Options) Enabled() bool { return len(o.Rules) > 0 || o.VerdictFile != "" }

// Apply evaluates the comparison, prints the verdict to w, writes the
// verdict file, and returns the gate's exit code (0, ExitRegression or
// ExitNoVerdict), or an error when the verdict file cannot be written.
func (o Options) Apply(c *report.Comparison, w io.Writer) (int, error) {
	res := Evaluate(c, o.Rules, string(o.Unknown))
	if len(o.Rules) == 0 {
		res.Summary = "no --fail-on given: the gate checks nothing and passes"
	}
	if o.Interrupted != 0 {
		res.Result, res.ExitCode = "interrupted", o.Interrupted
		res.Summary = "the run was interrupted, so the gate gives no verdict (what it found so far: " + res.Summary + ")"
	}
	res.WriteText(w)
	if o.VerdictFile != "" {
		if err := res.WriteFile(o.VerdictFile); err != nil {
			return 0, fmt.Errorf("--verdict-file: %w", err)
		}
	}
	return res.ExitCode, nil
}
