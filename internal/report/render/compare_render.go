package render

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/svgchart"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// baseSuffix names a comparison's baseline series in a legend.
const baseSuffix = " (base)"

// baseOf turns a series into its baseline twin: the same colour and
// marker, dashed and faint, named "(base)".
func baseOf(s svgchart.Series) svgchart.Series {
	s.Name += baseSuffix
	s.Dashed, s.Faint = true, true
	s.Points = nil
	return s
}

// baseReport is the baseline of a comparison, or nil.
func baseReport(r *report.Report) *report.Report {
	if r == nil || r.Comparison == nil {
		return nil
	}
	return r.Comparison.Base
}

// baseScenario returns the baseline's scenario matching s: the same name
// and the same prompt and output lengths (package compare's rule), or nil.
func baseScenario(r *report.Report, s *report.Scenario) *report.Scenario {
	b := baseReport(r)
	if b == nil || s == nil {
		return nil
	}
	for i := range b.Scenarios {
		bs := &b.Scenarios[i]
		if bs.Name == s.Name && bs.InputTokens == s.InputTokens && bs.OutputTokens == s.OutputTokens {
			return bs
		}
	}
	return nil
}

// fmtChange writes a relative change as a signed percentage.
func fmtChange(v float64) string {
	if !finite(v) {
		return "–"
	}
	p := v * 100
	s := strconv.FormatFloat(math.Abs(p), 'f', 1, 64)
	if math.Abs(p) >= 100 {
		s = strconv.FormatFloat(math.Abs(p), 'f', 0, 64)
	}
	switch {
	case s == "0.0":
		return "±0.0 %"
	case p < 0:
		return "−" + s + " %"
	}
	return "+" + s + " %"
}

// fmtInterval writes a relative confidence interval.
func fmtInterval(lo, hi float64) string {
	return fmtChange(lo) + " … " + fmtChange(hi)
}

// changeCell is a table cell for one metric's change.
func changeCell(m *report.MetricChange) string {
	if m == nil {
		return "–"
	}
	c := fmtChange(m.Change)
	switch m.Verdict {
	case report.VerdictWorse:
		return c + " worse"
	case report.VerdictBetter:
		return c + " better"
	case report.VerdictUnknown:
		return c + " (no CI)"
	}
	if m.Detectable != nil {
		return c + " (±" + fmtPct(*m.Detectable) + " detectable)"
	}
	return c
}

// metricLabel names a compared metric for people.
func metricLabel(metric string) string {
	switch metric {
	case report.MetricTTFT:
		return "TTFT"
	case report.MetricITL:
		return "ITL"
	case report.MetricDecode:
		return "decode speed"
	case report.MetricE2E:
		return "E2E latency"
	case report.MetricPrefill:
		return "prefill speed"
	case report.MetricSystemThroughput:
		return "system throughput"
	case report.CapacityMaxSafeQueue:
		return "max safe queue depth"
	case report.CapacityUseCase:
		return "use-case capacity"
	case report.MetricGoodShare:
		return "goodput share"
	case report.CapacityOn:
		return "capacity on"
	case report.MetricPrimingTTFT:
		return "priming TTFT"
	case report.MetricCachedShare:
		return "cached share"
	case report.CapacityConversations:
		return "capacity in conversations"
	}
	return metric
}

// metricValue formats a compared metric's value in its unit.
func metricValue(metric string, v float64) string {
	switch metric {
	case report.MetricTTFT, report.MetricE2E, report.MetricPrimingTTFT:
		return fmtSeconds(v)
	case report.MetricCachedShare:
		return fmtPct(v)
	case report.MetricITL:
		return fmtMS(v)
	case report.MetricGoodShare:
		return fmtPct(v)
	}
	return fmtRate(v) + " tok/s"
}

// FindingText is one line of the summary at the top (and of the
// terminal summary of `slaprobe compare`).
func FindingText(f report.Finding) string {
	if h := f.Headroom; h != nil {
		return HeadroomChangeText(h)
	}
	if c := f.Capacity; c != nil {
		label := metricLabel(c.Kind)
		if c.Rule != "" {
			label += " " + ruleLabel(c.Rule)
		}
		return fmt.Sprintf("%s · %s: %s → %s (%s); %s.", f.Scenario, label, fmtBound(*c.Base), fmtBound(*c.New), fmtChange(c.Change), c.Resolution)
	}
	m := f.Step
	where, stat := fmt.Sprintf("%s N=%d", modeLabel(f.Mode), f.Concurrency), "median"
	if f.Concurrency == 0 {
		// compare's ladder figure: the mode's whole ladder at once.
		where, stat = modeLabel(f.Mode)+" ladder (every N)", "geometric mean of the steps' medians"
		if f.Mode == sweep.ModeClosedLoop {
			where = "closed-loop ladder (every N > 1)"
		}
	}
	s := fmt.Sprintf("%s · %s · %s %s %s → %s: %s", f.Scenario, where, metricLabel(m.Metric), stat,
		metricValue(m.Metric, m.Base), metricValue(m.Metric, m.New), fmtChange(m.Change))
	if m.Low != nil && m.High != nil {
		switch {
		case f.FigureLevel > 0 && f.FigureLevel != f.Level:
			// The report's level is the family's: this interval is at the
			// figure's share of it.
			s += " (" + fmtPctFine(f.FigureLevel) + " CI " + fmtInterval(*m.Low, *m.High) + ", the report at " + fmtPct(f.Level) + ")"
		case f.Level > 0:
			s += " (" + fmtPct(f.Level) + " CI " + fmtInterval(*m.Low, *m.High) + ")"
		default:
			s += " (CI " + fmtInterval(*m.Low, *m.High) + ")"
		}
	}
	return s + "."
}

// compareView is the "What changed?" block at the top of a comparison.
type compareView struct {
	BaseLabel    string
	Base         []kv
	Differences  []string
	Regressions  []string
	Improvements []string
	Counts       string
}

func buildCompareView(r *report.Report) *compareView {
	c := r.Comparison
	if c == nil {
		return nil
	}
	v := &compareView{BaseLabel: c.BaseLabel, Differences: c.Differences}
	if b := c.Base; b != nil {
		v.Base = append(v.Base, kv{"Base", c.BaseLabel})
		if !b.Meta.StartedAt.IsZero() {
			v.Base = append(v.Base, kv{"Base run", b.Meta.StartedAt.UTC().Format("2006-01-02 15:04 MST")})
		}
		if b.Meta.Model != "" {
			v.Base = append(v.Base, kv{"Base model", strings.TrimSpace(b.Meta.Model + " · " + strings.TrimSpace(b.Meta.Engine+" "+b.Meta.EngineVersion))})
		}
	}
	for _, f := range c.Findings() {
		if f.Worse {
			v.Regressions = append(v.Regressions, FindingText(f))
		} else {
			v.Improvements = append(v.Improvements, FindingText(f))
		}
	}
	var worse, better, same, unknown int
	for _, s := range c.Steps {
		for _, m := range s.Metrics {
			switch m.Verdict {
			case report.VerdictWorse:
				worse++
			case report.VerdictBetter:
				better++
			case report.VerdictNoChange:
				same++
			default:
				unknown++
			}
		}
	}
	if c.Headroom != nil && len(c.Steps) == 0 {
		v.Counts = "The headroom is known to its bracket (the last speed-up that held, the first that did not): it changed significantly when the two runs' brackets do not overlap."
		return v
	}
	v.Counts = fmt.Sprintf("%d step figures compared: %d worse, %d better, %d with no detectable change, %d without a confidence interval (system throughput, too few requests, rounds or slices for the report's level, or no raw samples).",
		worse+better+same+unknown, worse, better, same, unknown)
	tooFew, rounds, slices := 0, 0, 0 // the rounds per burst and slices per closed loop at N > 1 that would judge them all
	for _, s := range c.Steps {
		for _, m := range s.Metrics {
			if m.NeededPerRun > 0 {
				tooFew++
				switch {
				case s.Mode == sweep.ModeBurst:
					rounds = max(rounds, m.NeededPerRun)
				case s.Concurrency > 1:
					slices = max(slices, m.NeededPerRun)
				}
			}
		}
	}
	if tooFew > 0 {
		v.Counts += fmt.Sprintf(" %d of these have too few burst rounds, slices or requests for the report’s level (each one’s note in report.json says how many would give it a verdict)", tooFew)
		var need []string
		if rounds > 0 {
			need = append(need, fmt.Sprintf("%d rounds per burst (burst.repeat)", rounds))
		}
		if slices > 0 {
			need = append(need, fmt.Sprintf("%d slices of %d requests per closed-loop step", slices, c.Method.MinSamples))
		}
		if len(need) > 0 {
			v.Counts += ": " + strings.Join(need, " and ") + " would judge them"
		}
		v.Counts += "."
	}
	if !c.Confidence {
		v.Counts += " No confidence is available: at least one report has no raw samples, so every step figure is compared on its summaries."
	}
	return v
}

// compareMethod explains the comparison in the method section.
func compareMethod(c *report.Comparison) kv {
	m := c.Method
	grouped := "" // the steps judged on groups of their requests
	resampled := "resamples"
	if m.RankBelow > 0 {
		resampled = "is computed from"
	}
	if m.MinRounds > 0 { // comparisons written before bursts were judged on their rounds have none
		grouped = fmt.Sprintf("A burst’s requests share one queue, so they are not independent samples: a burst step is judged only when both runs repeated it at least %d times (burst.repeat), "+
			"and then its figure is the median of the rounds’ medians and the interval %s the rounds; otherwise it is compared as a number. "+
			"Each scenario’s ladder of each mode is also one figure per metric (“burst ladder”, “closed-loop ladder”), the geometric mean of its steps’ medians, judged on every step’s rounds or slices at once, each step’s against each other’s (a stratified rank test): "+
			"a step’s few rounds or slices rarely reach the report’s level alone, the ladder’s do. ", m.MinRounds, resampled)
	}
	if m.Slices > 0 && m.MinRounds > 0 { // comparisons written before closed loops were sliced have none
		grouped += fmt.Sprintf("A closed loop at N > 1 is judged the same way in time: its users fall into a pattern of who waits for whose prefill that holds for seconds, "+
			"so its requests, in the order they ended, are cut into up to %d consecutive slices of at least %d; the figure is the median of the slices’ medians "+
			"and the interval %s the slices (at least %d per run, or no verdict). ", m.Slices, m.MinSamples, resampled, m.MinRounds)
	}
	if m.RankBelow > 0 { // comparisons written before the rank interval have none
		grouped += fmt.Sprintf("A figure of fewer than %d values in either run (requests, rounds or slices) takes instead the exact rank interval of the shift between the runs "+
			"(the Mann–Whitney test inverted, Hodges–Lehmann): a bootstrap’s interval cannot reach past the data, so with few values it would flag two runs of an unchanged server far more often than its level says. "+
			"The rank interval keeps its level at every size; when the values are too few to reach it at all (3 against 3 can give p = 0.1 at best), the figure gets no verdict and its note says how many per run would give one. ",
			m.RankBelow)
	}
	level := fmt.Sprintf("The %s confidence interval", fmtPct(m.Level))
	if m.FigureLevel > 0 { // comparisons written before the family's level have none
		level = fmt.Sprintf("The report compares %d figures, and at %s each, chance alone would flag some of them in most comparisons of two runs of an unchanged server. "+
			"So %s is the level of the whole report: each figure’s interval is at %s (%s shared by the %d, Bonferroni), and two runs of an unchanged server get any figure flagged with a probability of at most %s. "+
			"That interval", m.Figures, fmtPct(m.Level), fmtPct(m.Level), fmtPctFine(m.FigureLevel), fmtPct(1-m.Level), m.Figures, fmtPct(1-m.Level))
	}
	return kv{"Comparison", fmt.Sprintf("each step’s per-request values (TTFT, ITL, decode speed, E2E, prefill speed) are compared on their median. "+
		"%s of median(new) − median(base) is the percentile interval of %d bootstrap resamples of both runs’ raw samples "+
		"(PCG generator, seed %d, so the report is reproducible). A change is significant, and called better or worse, when the interval excludes zero "+
		"and the change is at least %s of the base value; smaller real drifts are reported as no detectable change, with the smallest shift of the new run the comparison would have called significant in either direction (“±8%% detectable”: to see smaller ones, run longer). A verdict needs at least %d requests per run. "+
		"%sSystem throughput is one number per step and capacity a point on the tested ladder: both are compared as numbers, and a capacity changes only when it moves past a measured N.",
		level, m.Resamples, m.Seed, fmtPct(m.PracticalFloor), m.MinSamples, grouped)}
}

// headlineChange is the change line of a headline tile.
func headlineChange(base, cur *report.Figure, r *report.Report, metric string, boundish bool) (string, string) {
	if base == nil || cur == nil {
		if base != nil {
			return "base: " + figureText(base, boundish) + "; not measured in this run", ""
		}
		if cur != nil && r.Comparison != nil {
			return "not measured in the base run", ""
		}
		return "", ""
	}
	var ch float64
	if base.Value != 0 {
		ch = (cur.Value - base.Value) / base.Value
	}
	text := "base " + figureText(base, boundish) + " → " + fmtChange(ch)
	cls := ""
	// The verdict of the step the figure comes from, when both runs have
	// it at the same place.
	if metric != "" && base.Scenario == cur.Scenario && base.Mode == cur.Mode && base.Concurrency == cur.Concurrency {
		if m := r.Comparison.Step(cur.Scenario, cur.Mode, cur.Concurrency).Metric(metric); m != nil {
			switch m.Verdict {
			case report.VerdictWorse, report.VerdictBetter:
				text += ", " + m.Verdict
				cls = m.Verdict
			case report.VerdictNoChange:
				text += ", no detectable change"
			}
		}
	} else if metric != "" {
		text += " (measured at another step)"
	}
	return text, cls
}

func figureText(f *report.Figure, boundish bool) string {
	if boundish {
		return fmtBound(statBound(f))
	}
	switch f.Unit {
	case "s":
		return fmtSeconds(f.Value)
	case "tok/s":
		return fmtRate(f.Value) + " tok/s"
	}
	return strconv.FormatFloat(f.Value, 'g', 4, 64)
}

// capacityChangeText is a capacity's change for a tile or table.
func capacityChangeText(c *report.CapacityChange) string {
	if c == nil {
		return ""
	}
	switch c.Presence {
	case report.OnlyInBase:
		return "only in the base run: " + fmtBound(*c.Base)
	case report.OnlyInNew:
		return "not in the base run"
	}
	s := "base " + fmtBound(*c.Base) + " → " + fmtChange(c.Change)
	switch c.Verdict {
	case report.VerdictWorse, report.VerdictBetter:
		s += ", " + c.Verdict
	case report.VerdictNoChange:
		s += ", no change at the ladder’s resolution"
	default:
		if c.Note != "" {
			s += "; " + c.Note
		}
	}
	return s
}

// stepChangeColumns are the "vs base" columns of a step table.
func stepChangeColumns(r *report.Report, s *report.Scenario, mode sweep.Mode) []column {
	if r.Comparison == nil {
		return nil
	}
	cell := func(metric string) func(report.Step) string {
		return func(st report.Step) string {
			sc := r.Comparison.Step(s.Name, mode, st.Concurrency)
			switch {
			case sc == nil:
				return "–"
			case sc.Presence == report.OnlyInNew:
				return "not in base"
			case sc.Presence == report.OnlyInBase:
				return "only in base"
			case sc.NotMeasured == "both":
				return "not measured"
			case sc.NotMeasured != "":
				return "not measured in " + sc.NotMeasured
			}
			return changeCell(sc.Metric(metric))
		}
	}
	g := "median per request (N > 1: of the slices’ medians), change vs base"
	if mode == sweep.ModeBurst {
		g = "median per request (repeated bursts: of the rounds’ medians), change vs base"
	}
	cols := []column{
		{2, g, "Δ", "TTFT", cell(report.MetricTTFT)},
		{2, g, "Δ", "ITL", cell(report.MetricITL)},
		{2, g, "Δ", "decode", cell(report.MetricDecode)},
		{2, g, "Δ", "E2E", cell(report.MetricE2E)},
		{2, g, "Δ", "prefill", cell(report.MetricPrefill)},
		{2, "step, change vs base", "Δ", "system tok/s", cell(report.MetricSystemThroughput)},
	}
	for _, st := range s.Steps(mode) {
		if st.Conversation != nil {
			cols = append(cols, column{2, g, "Δ", "priming TTFT", cell(report.MetricPrimingTTFT)},
				column{2, "step, change vs base", "Δ", "cached share", cell(report.MetricCachedShare)})
			break
		}
	}
	for _, st := range s.Steps(mode) {
		if st.GoodShare != nil {
			return append(cols, column{2, "step, change vs base", "Δ", "good share", cell(report.MetricGoodShare)})
		}
	}
	return cols
}

// baseBand draws a comparison's baseline range as its two edges, faint
// and dashed, over NEW's shaded band.
func baseBand(r *report.Report, idx []int, get func(report.Step) float64, unit func(float64) string) []svgchart.Series {
	b := baseReport(r)
	if b == nil {
		return nil
	}
	var bidx []int
	for _, i := range idx {
		for j := range b.Scenarios {
			if baseScenario(r, &r.Scenarios[i]) == &b.Scenarios[j] {
				bidx = append(bidx, j)
			}
		}
	}
	a, _ := rangeBand(b, bidx, get, unit)
	if len(a.Hi) == 0 {
		return nil
	}
	hi := svgchart.Series{Name: "highest scenario" + baseSuffix, Color: colorRange, Marker: 2, Dashed: true, Faint: true}
	lo := svgchart.Series{Name: "lowest scenario" + baseSuffix, Color: colorRange, Marker: 3, Dashed: true, Faint: true}
	for _, p := range a.Hi {
		p.Tip = "base · " + p.Tip
		hi.Points = append(hi.Points, p)
	}
	for _, p := range a.Lo {
		p.Tip = "base · " + p.Tip
		lo.Points = append(lo.Points, p)
	}
	return []svgchart.Series{hi, lo}
}
