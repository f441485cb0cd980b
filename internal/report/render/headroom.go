package render

// This file draws a headroom report (slaprobe headroom, Report.Headroom):
// the good share of each speed-up with the rule's line and the crossing,
// the step table, and the headroom with its bound.

import (
	"bufio"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/internal/svgchart"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

const colorHeadroom = "#1f6feb"

// isHeadroomOnly reports a report of slaprobe headroom: a headroom and no
// scenario, drawn as the headroom alone.
func isHeadroomOnly(r *report.Report) bool { return r.Headroom != nil && len(r.Scenarios) == 0 }

// headroomTitle is "<workload> headroom on <model>".
func headroomTitle(r *report.Report) string {
	t := r.Headroom.Workload + " headroom"
	if r.Meta.Model != "" {
		t += " on " + r.Meta.Model
	}
	return t
}

// HeadroomSentence says what the headroom is, with its bound: "3.05× the
// trace's traffic (interpolated between ×3, which held, and ×3.5, which
// did not)", "at least 4× …", "under 0.5× …".
func HeadroomSentence(h *sweep.Headroom) string {
	lo, hi, _ := h.Bracket()
	switch h.Bound {
	case sweep.BoundWithin:
		return fmt.Sprintf("%s the trace's traffic meets %q (interpolated between ×%s, which held, and ×%s, which did not).",
			h, h.Rule, sweep.FormatSpeedup(lo), sweep.FormatSpeedup(hi))
	case sweep.BoundAtLeast:
		return fmt.Sprintf("At least %s× the trace's traffic meets %q: every speed-up tested held, up to ×%s; the headroom is higher than the sweep reached.",
			sweep.FormatSpeedup(h.Multiple), h.Rule, sweep.FormatSpeedup(lo))
	case sweep.BoundBelow:
		return fmt.Sprintf("Under %s× the trace's traffic: even ×%s missed %q; the target does not carry the trace as recorded.",
			sweep.FormatSpeedup(hi), sweep.FormatSpeedup(hi), h.Rule)
	}
	return "No speed-up was measured: the headroom is unknown."
}

// HeadroomChangeText is "headroom 3.05× → 2.14×: 30 % less (significant: …)".
func HeadroomChangeText(c *report.HeadroomChange) string {
	word := "more"
	if c.Change < 0 {
		word = "less"
	}
	s := fmt.Sprintf("%s headroom %s → %s: %.0f %% %s", c.Workload, c.BaseText, c.NewText, 100*math.Abs(c.Change), word)
	switch c.Verdict {
	case report.VerdictWorse, report.VerdictBetter:
		s += fmt.Sprintf(" (significant: %s)", c.Resolution)
	case report.VerdictNoChange:
		s += fmt.Sprintf(" (no detectable change: %s)", c.Resolution)
	default:
		s += " (no verdict: " + c.Note + ")"
	}
	return s + "."
}

// headroomTiles are the headline of a headroom report.
func headroomTiles(r *report.Report) []tile {
	h := r.Headroom
	lo, hi, _ := h.Bracket()
	t := tile{Label: "Traffic headroom", Value: h.String(), Sub: "of " + h.Workload + "'s traffic, on " + h.Rule}
	switch h.Bound {
	case sweep.BoundWithin:
		t.Extra = fmt.Sprintf("between ×%s (held) and ×%s", sweep.FormatSpeedup(lo), sweep.FormatSpeedup(hi))
	case sweep.BoundAtLeast:
		t.Extra = "every step held: a lower bound"
	case sweep.BoundBelow:
		t.Extra = "no step held"
	}
	if c := r.Comparison; c != nil && c.Headroom != nil {
		t.Change = HeadroomChangeText(c.Headroom)
		t.ChangeClass = map[string]string{report.VerdictWorse: "worse", report.VerdictBetter: "better"}[c.Headroom.Verdict]
	}
	rate := tile{Label: "Trace's own rate", Value: fmtRate(h.BaseRate), Unit: "req/s",
		Sub: fmt.Sprintf("%d requests per step", h.Requests)}
	if h.Bound == sweep.BoundWithin || h.Bound == sweep.BoundAtLeast {
		rate.Extra = "the headroom is " + fmtRate(h.BaseRate*h.Multiple) + " req/s of this mix"
	}
	return []tile{t, rate}
}

// headroomTable is one row per speed-up.
func headroomTable(h *sweep.Headroom) table {
	t := table{Head: []string{"speed-up", "offered rate", "good share", "good / sent", "TTFT p50", "TTFT p99", "sent late p99"},
		Numeric: []bool{true, true, true, true, true, true, true}}
	limit := ruleLimit(h.Rule)
	for _, s := range h.Steps {
		verdict := "held"
		if s.GoodShare < limit {
			verdict = "missed"
		}
		row := []string{"×" + sweep.FormatSpeedup(s.Speedup), fmtRate(s.OfferedRate) + " req/s",
			fmtPct(s.GoodShare) + " " + verdict, fmt.Sprintf("%d / %d", s.Good, s.Requests),
			orDash(secondsOr(s.TTFT.P50, s.Succeeded)), orDash(secondsOr(s.TTFT.P99, s.Succeeded)), fmtSeconds(s.Late.Seconds())}
		if s.Dropped > 0 {
			row[3] += fmt.Sprintf(" (%d not sent)", s.Dropped)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func secondsOr(v float64, n int) string {
	if n == 0 {
		return ""
	}
	return fmtSeconds(v)
}

// ruleLimit is the good share a goodput rule asks for; 0.95 when the
// rule does not read.
func ruleLimit(rule string) float64 {
	r, err := sweep.ParseCapacityRule(rule)
	if err != nil || r.Metric != "goodput" {
		return 0.95
	}
	return r.Limit
}

// headroomSeries is a run's good share in percent per speed-up.
func headroomSeries(h *sweep.Headroom, name string) svgchart.Series {
	s := svgchart.Series{Name: name, Color: colorHeadroom}
	for _, st := range h.Steps {
		s.Points = append(s.Points, svgchart.Point{X: st.Speedup, Y: 100 * st.GoodShare,
			Tip: fmt.Sprintf("×%s · %s req/s · good %s (%d/%d)", sweep.FormatSpeedup(st.Speedup), fmtRate(st.OfferedRate), fmtPct(st.GoodShare), st.Good, st.Requests)})
	}
	return s
}

// figHeadroom is the chart of good share against speed-up and the step
// table.
func figHeadroom(r *report.Report) figure {
	h := r.Headroom
	f := newFigure(slo.ChartHeadroom, "Good share against speed-up: "+h.Workload,
		"The trace replayed open-loop by its own timestamps, time divided by the speed-up: ×2 sends its requests twice as fast. "+
			"Each point is one speed-up’s share of good requests (succeeded within their TTFT threshold); the horizontal line is the rule, "+
			"the vertical line the headroom, interpolated linearly between the last speed-up that held and the first that did not.")
	f.Wide = true
	var xs []float64
	for _, s := range h.Steps {
		xs = append(xs, s.Speedup)
	}
	c := svgchart.Chart{ID: f.DOMID + "-svg", Title: f.Title,
		X: svgchart.Axis{Label: "speed-up (× the trace's rate)", Ticks: xs, Fmt: func(v float64) string { return "×" + sweep.FormatSpeedup(v) }},
		Y: svgchart.Axis{Label: "good share (%)", Min: 0, Max: 100, Fmt: svgchart.TickPlain}}
	c.Series = append(c.Series, headroomSeries(h, "good share"))
	if b := baseReport(r); b != nil && b.Headroom != nil {
		bs := baseOf(headroomSeries(b.Headroom, "good share"))
		bs.Points = headroomSeries(b.Headroom, "").Points
		for _, p := range bs.Points {
			xs = append(xs, p.X)
		}
		c.Series = append(c.Series, bs)
		c.X.Ticks = dedupe(xs)
	}
	limit := ruleLimit(h.Rule)
	c.Refs = append(c.Refs, svgchart.RefLine{Value: 100 * limit, Color: colorCapTTFT, Label: h.Rule})
	if h.Bound == sweep.BoundWithin || h.Bound == sweep.BoundAtLeast {
		c.Refs = append(c.Refs, svgchart.RefLine{Value: h.Multiple, Vertical: true, Color: colorCapacityMrk, Label: "headroom " + h.String()})
	}
	c.SeparateRefs()
	draw(&c, &f)
	t := headroomTable(h)
	f.Table = &t
	f.Findings = []string{HeadroomSentence(h)}
	if c := r.Comparison; c != nil && c.Headroom != nil {
		f.Findings = append(f.Findings, HeadroomChangeText(c.Headroom))
	}
	for _, s := range h.Steps {
		if s.Late > time.Second {
			f.Findings = append(f.Findings, fmt.Sprintf("At ×%s requests left up to %s late (p99): the replaying machine lagged, and that step understates the target.",
				sweep.FormatSpeedup(s.Speedup), s.Late.Round(time.Millisecond)))
		}
	}
	return f
}

// headroomSection is a headroom report's one section.
func headroomSection(r *report.Report) section {
	h := r.Headroom
	intro := fmt.Sprintf("%s: %d requests of %s", h.Workload, h.Requests, strings.TrimSpace(h.Trace+" ("+h.Format+")"))
	if h.Trace == "" {
		intro = fmt.Sprintf("%s: %d requests", h.Workload, h.Requests)
	}
	intro += fmt.Sprintf(", %s req/s as recorded, replayed at each speed-up with a fresh prefix salt. A step holds when its good share meets %q.", fmtRate(h.BaseRate), h.Rule)
	sec := section{ID: "headroom", Title: "How much more traffic can it take?", Intro: intro, Figures: []figure{figHeadroom(r)}}
	if b := baseReport(r); b != nil && b.Headroom != nil {
		f := newFigure(slo.ChartHeadroom+"-base", "The base run’s steps", "Each speed-up of the base run, as in the table above; its good shares are the dashed line of the chart.")
		f.Wide = true
		t := headroomTable(b.Headroom)
		f.Table, f.Findings = &t, []string{HeadroomSentence(b.Headroom)}
		sec.Figures = append(sec.Figures, f)
	}
	return sec
}

// headroomMethod is the method section of a headroom report.
func headroomMethod(r *report.Report) []kv {
	out := []kv{
		{"Replay", "the trace’s requests are sent open-loop: request i leaves (t_i − t_0) ÷ speed-up after the step starts, whatever the answers before it, with its own prompt and answer lengths; requests that shared prefix blocks in the trace share them here, under a fresh salt per step."},
		{"Good", "a request is good when it succeeded and its TTFT met its length class’s threshold (or the one given); a step’s good share counts the requests not sent (too many in flight) as not good."},
		{"Headroom", "the largest speed-up whose good share meets the rule, interpolated linearly between the last that held and the first that did not, as every capacity is. “≥” means every speed-up held (a lower bound), “<” that none did."},
		{"Sent late", "how far behind its timestamp a request left (p99): large values mean the replaying machine, not the target, fell behind."},
	}
	if r.Comparison != nil && r.Comparison.Headroom != nil {
		out = append(out, kv{"Comparison", "a headroom is one interpolated number per run, known only to its bracket. The change is significant when the brackets do not overlap: one run failed at a speed-up the other held at. " +
			"Each step’s held or missed is taken as measured; a crossing close to a tested speed-up can land either side of it in two runs of an unchanged target."})
	}
	return out
}

// markdownHeadroom writes the body of a headroom report's report.md.
func markdownHeadroom(w *bufio.Writer, r *report.Report) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	h := r.Headroom
	p("## Headline\n\n")
	var rows [][]string
	for _, t := range headroomTiles(r) {
		row := []string{t.Label, strings.TrimSpace(t.Value + " " + t.Unit), strings.TrimSpace(strings.Trim(t.Sub+"; "+t.Extra, "; "))}
		rows = append(rows, row)
	}
	mdTable(w, []string{"figure", "value", "where"}, []bool{false, true, false}, rows)
	sec := headroomSection(r)
	p("## %s\n\n%s\n\n%s\n\n", sec.Title, mdEscape(sec.Intro), mdEscape(HeadroomSentence(h)))
	t := headroomTable(h)
	mdTable(w, t.Head, t.Numeric, t.Rows)
	for _, f := range sec.Figures[0].Findings[1:] {
		if r.Comparison == nil || r.Comparison.Headroom == nil || f != HeadroomChangeText(r.Comparison.Headroom) {
			p("> %s\n\n", mdEscape(f))
		}
	}
	if b := baseReport(r); b != nil && b.Headroom != nil {
		p("### The base run\n\n%s\n\n", mdEscape(HeadroomSentence(b.Headroom)))
		t := headroomTable(b.Headroom)
		mdTable(w, t.Head, t.Numeric, t.Rows)
	}
	p("## Method\n\n")
	for _, m := range headroomMethod(r) {
		p("- **%s:** %s\n", m.K, mdEscape(m.V))
	}
	p("\n---\nGenerated by slaprobe %s, finished %s.\n", mdEscape(r.Meta.ToolVersion), r.Meta.FinishedAt.UTC().Format(time.RFC3339))
}
