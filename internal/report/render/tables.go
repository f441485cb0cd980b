package render

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// column is one column of a step table; the HTML groups columns under a
// shared header, Markdown prefixes the group to the name.
type column struct {
	part    int    // 0: latency table, 1: throughput table, 2: change vs base; N is in all
	group   string // HTML group header
	mdGroup string // Markdown prefix
	name    string
	get     func(report.Step) string
}

func secCell(v float64) string {
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
	return grouped(v, 1)
}

func msCell(v float64) string { return strconv.FormatFloat(v*1000, 'f', 1, 64) }

func stepColumns(steps []report.Step, mode sweep.Mode) []column {
	var hasEff, hasQueue, hasPower, hasCost, hasJ, hasP10, hasP1, hasDrain, hasGood bool
	for _, st := range steps {
		hasGood = hasGood || st.GoodShare != nil
		hasDrain = hasDrain || st.Drain != nil
		hasP10 = hasP10 || st.Decode.P10 > 0
		hasP1 = hasP1 || st.Decode.P1 > 0
		hasEff = hasEff || st.ScalingEfficiency != nil
		hasQueue = hasQueue || st.QueueWaitSeconds != nil
		if st.Power != nil {
			hasPower = true
			hasCost = hasCost || st.Power.CostPerHourUSD > 0
			hasJ = hasJ || st.Power.JoulesPerToken > 0
		}
	}
	cols := []column{
		{-1, "", "", "N", func(s report.Step) string {
			if s.StartedBusy() {
				return strconv.Itoa(s.Concurrency) + " " + busyMark
			}
			return strconv.Itoa(s.Concurrency)
		}},
		{0, "requests", "", "ok / sent", func(s report.Step) string { return fmt.Sprintf("%d / %d", s.RequestsOK, s.RequestsSent) }},
		{0, "requests", "", "success", func(s report.Step) string { return fmtPct(s.SuccessRate) }},
	}
	if hasGood {
		cols = append(cols,
			column{0, "requests", "", "good", func(s report.Step) string {
				if s.GoodShare == nil {
					return "–"
				}
				return fmtPct(*s.GoodShare)
			}},
			column{0, "requests", "", "good/s", func(s report.Step) string {
				if s.GoodShare == nil {
					return "–"
				}
				return strconv.FormatFloat(s.GoodPerSecond, 'f', 2, 64)
			}})
	}
	dist := func(group, md string, names []sweep.Stat, d func(report.Step) sweep.Dist, cell func(float64) string) {
		for _, n := range names {
			n := n
			cols = append(cols, column{0, group, md, string(n), func(s report.Step) string { return cell(d(s).Stat(n)) }})
		}
	}
	// Decode speed is higher-is-better: the tail that hurts users is the
	// slow one, so its columns are the low percentiles (absent in reports
	// written before they were kept).
	decode := func(name string, get func(sweep.Dist) float64) {
		cols = append(cols, column{0, "decode tok/s per user", "decode", name, func(s report.Step) string {
			if v := get(s.Decode); v > 0 {
				return fmtRate(v)
			}
			return "–"
		}})
	}
	decode("mean", func(d sweep.Dist) float64 { return d.Mean })
	decode("p50", func(d sweep.Dist) float64 { return d.P50 })
	if hasP10 {
		decode("p10 (slowest 10%)", func(d sweep.Dist) float64 { return d.P10 })
	}
	if hasP1 {
		decode("p1 (slowest 1%)", func(d sweep.Dist) float64 { return d.P1 })
	}
	dist("ITL ms", "ITL ms", []sweep.Stat{sweep.StatMean, sweep.StatP50, sweep.StatP90, sweep.StatP99}, func(s report.Step) sweep.Dist { return s.ITL }, msCell)
	dist("TTFT s", "TTFT s", []sweep.Stat{sweep.StatMean, sweep.StatP50, sweep.StatP90, sweep.StatP95, sweep.StatP99}, func(s report.Step) sweep.Dist { return s.TTFT }, secCell)
	dist("E2E s", "E2E s", []sweep.Stat{sweep.StatP50, sweep.StatP90, sweep.StatP99}, func(s report.Step) sweep.Dist { return s.E2E }, secCell)
	cols = append(cols,
		column{1, "per user", "", "prefill tok/s", func(s report.Step) string { return fmtRate(s.PrefillTokensPerSecond) }},
		column{1, "system", "", "system tok/s", func(s report.Step) string { return fmtRate(s.SystemTokensPerSecond) }},
		column{1, "system", "", "tokens/h", func(s report.Step) string { return fmtBig(s.TokensPerHour) }},
	)
	if hasEff && mode == sweep.ModeClosedLoop {
		cols = append(cols, column{1, "system", "", "scaling efficiency", func(s report.Step) string {
			if s.ScalingEfficiency == nil {
				return "–"
			}
			return fmtPct(*s.ScalingEfficiency)
		}})
	}
	if hasQueue {
		cols = append(cols, column{1, "engine", "", "queue wait s", func(s report.Step) string {
			if s.QueueWaitSeconds == nil {
				return "–"
			}
			return secCell(*s.QueueWaitSeconds)
		}})
	}
	if hasDrain {
		cols = append(cols, column{1, "engine", "", "at step start", startCell})
	}
	if hasPower {
		pw := func(f func(*report.Power) string) func(report.Step) string {
			return func(s report.Step) string {
				if s.Power == nil {
					return "–"
				}
				return f(s.Power)
			}
		}
		cols = append(cols,
			column{1, "GPU power", "", "avg W", pw(func(p *report.Power) string { return grouped(p.AvgWatts, 0) })},
			column{1, "GPU power", "", "peak W", pw(func(p *report.Power) string { return grouped(p.PeakWatts, 0) })},
		)
		if hasJ {
			cols = append(cols, column{1, "GPU power", "", "J/token", pw(func(p *report.Power) string { return strconv.FormatFloat(p.JoulesPerToken, 'f', 2, 64) })})
		}
		if hasCost {
			cols = append(cols, column{1, "GPU power", "", "$/h", pw(func(p *report.Power) string { return fmtUSD(p.CostPerHourUSD) })})
		}
	}
	return cols
}

// stepTables are the per-step tables of one scenario and mode: latency
// first, then throughput, queue and power (one table would be too wide).
//
// In a comparison each table has change columns, and the steps only the
// baseline measured follow as rows of their own, marked "(base)".
func stepTables(r *report.Report, s *report.Scenario, mode sweep.Mode) []table {
	steps := sortedSteps(s.Steps(mode))
	baseOnly := map[int]bool{}
	if c := r.Comparison; c != nil {
		if b := baseScenario(r, s); b != nil {
			for _, st := range sortedSteps(b.Steps(mode)) {
				if sc := c.Step(s.Name, mode, st.Concurrency); sc != nil && sc.Presence == report.OnlyInBase {
					baseOnly[st.Concurrency] = true
					steps = append(steps, st)
				}
			}
		}
	}
	all := stepColumns(steps, mode)
	all = append(all, stepChangeColumns(r, s, mode)...)
	var out []table
	captions := []string{modeTitle(mode) + " · latency", modeTitle(mode) + " · throughput"}
	if r.Comparison != nil {
		captions = append(captions, modeTitle(mode)+" · change vs base ("+r.Comparison.BaseLabel+")")
	}
	for part, caption := range captions {
		var cols []column
		for _, c := range all {
			if c.part == -1 || c.part == part {
				cols = append(cols, c)
			}
		}
		t := table{Class: "steps", Caption: caption}
		for _, c := range cols {
			t.Head = append(t.Head, c.name)
			t.MDHead = append(t.MDHead, mdHeader(c))
			t.Numeric = append(t.Numeric, true)
			if n := len(t.Groups); n > 0 && t.Groups[n-1].Label == c.group {
				t.Groups[n-1].Span++
			} else {
				t.Groups = append(t.Groups, colGroup{Label: c.group, Span: 1})
			}
		}
		for k, st := range steps {
			cls := ""
			if st.StartedBusy() {
				cls = "busy"
			}
			only := k >= len(steps)-len(baseOnly) && baseOnly[st.Concurrency]
			if only {
				cls = "base-only"
			}
			t.RowClass = append(t.RowClass, cls)
			row := make([]string, len(cols))
			for i, c := range cols {
				// A step that measured nothing has no figures, only zeros:
				// a dash in every cell but N (the reason is in a note).
				if !st.Measured() && c.part != -1 && c.part != 2 {
					row[i] = "–"
					continue
				}
				row[i] = c.get(st)
			}
			if only {
				row[0] += " (base only)"
			}
			t.Rows = append(t.Rows, row)
		}
		out = append(out, t)
	}
	return out
}

func modeTitle(m sweep.Mode) string {
	switch m {
	case sweep.ModeClosedLoop:
		return "Closed loop (N requests always in flight)"
	case sweep.ModeBurst:
		return "Burst (N requests sent at once)"
	}
	return string(m)
}

// mdHeader names a column for Markdown.
func mdHeader(c column) string {
	return strings.TrimSpace(c.mdGroup + " " + c.name)
}

// betweenText says where a capacity on a rule came from: which measured
// steps bracket an interpolated crossing.
func betweenText(c sweep.RuleCapacity) string {
	switch {
	case len(c.Between) == 2 && c.Approximate:
		return fmt.Sprintf("interpolated between N=%d and N=%d (crossing at %.2f)", c.Between[0], c.Between[1], c.Estimate)
	case len(c.Between) == 2:
		return fmt.Sprintf("N=%d meets it, N=%d does not", c.Between[0], c.Between[1])
	case c.AtLeast:
		return "every N tested meets it"
	}
	return "the smallest N tested misses it"
}

// ruleLabel writes a rule of sweep.capacity_on with ≥ and ≤.
func ruleLabel(rule string) string {
	return strings.NewReplacer(">=", "≥", "<=", "≤").Replace(rule)
}

func capacityOnTable(r *report.Report) table {
	t := table{Class: "cap", Head: []string{"scenario", "rule", "capacity", "from the steps", "tested up to"},
		Numeric: []bool{false, false, true, false, true}}
	for _, c := range r.Capacity.On {
		t.Rows = append(t.Rows, []string{c.Scenario, ruleLabel(c.Rule), fmtBound(c.Bound), betweenText(c), fmt.Sprintf("N=%d (%s)", c.MaxTested, modeLabel(c.Mode))})
	}
	if cmp := r.Comparison; cmp != nil {
		t.Head = append(t.Head, "change vs base")
		t.Numeric = append(t.Numeric, false)
		for i, c := range r.Capacity.On {
			t.Rows[i] = append(t.Rows[i], orDash(capacityChangeText(cmp.CapacityOnRule(report.CapacityOn, c.Scenario, c.Rule))))
		}
	}
	return t
}

func figCapacityOnTable(r *report.Report) figure {
	f := newFigure(slo.ChartCapacityOn, "Capacity on goodput and percentiles",
		"The largest closed-loop N that meets each rule of sweep.capacity_on. Goodput is the share of a step’s requests that succeeded and met every threshold of the scenario at once. Between two measured steps the rule’s figure is interpolated linearly; the column “from the steps” names the two that bracket the crossing.")
	f.Wide = true
	t := capacityOnTable(r)
	f.Table = &t
	return f
}
