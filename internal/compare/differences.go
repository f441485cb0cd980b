package compare

import (
	"fmt"
	"slices"
	"strings"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// differences says how two runs differ in what they measured, for the top
// of the report: they compare, but a reader must know.
func differences(base, cur *report.Report) []string {
	var out []string
	add := func(what, b, n string) {
		if b != n {
			out = append(out, fmt.Sprintf("Different %s: base %s, new %s.", what, orNone(b), orNone(n)))
		}
	}
	if base.SchemaVersion == report.SchemaVersionV1 || cur.SchemaVersion == report.SchemaVersionV1 || !base.HasSamples() || !cur.HasSamples() {
		which := "The base report"
		switch {
		case (base.HasSamples()) && !cur.HasSamples():
			which = "The new report"
		case !base.HasSamples() && !cur.HasSamples():
			which = "Neither report"
		}
		if which == "Neither report" {
			out = append(out, "Neither report kept raw samples (slaprobe.report/v1): changes are compared on summaries only and no confidence is available.")
		} else {
			out = append(out, which+" kept no raw samples (slaprobe.report/v1): changes are compared on summaries only and no confidence is available.")
		}
	}
	bm, nm := base.Meta, cur.Meta
	add("model", bm.Model, nm.Model)
	add("engine", bm.Engine, nm.Engine)
	add("engine version", bm.EngineVersion, nm.EngineVersion)
	add("GPU", gpuText(bm.GPU), gpuText(nm.GPU))
	add("target", report.RedactURL(bm.TargetURL), report.RedactURL(nm.TargetURL))
	add("API", bm.APIOrChat(), nm.APIOrChat())
	if bm.Interrupted {
		out = append(out, "The base run was interrupted: it holds only the steps it finished.")
	}
	if nm.Interrupted {
		out = append(out, "The new run was interrupted: it holds only the steps it finished.")
	}
	bc, nc := base.Config, cur.Config
	add("closed-loop ladder", ints(bc.ClosedLoopLadder), ints(nc.ClosedLoopLadder))
	add("burst ladder", ints(bc.BurstLadder), ints(nc.BurstLadder))
	add("closed-loop step", seconds(bc.StepDurationSeconds), seconds(nc.StepDurationSeconds))
	add("warm-up", seconds(bc.WarmupSeconds), seconds(nc.WarmupSeconds))
	add("prompt caching", onOff(bc.PromptCaching), onOff(nc.PromptCaching))
	bt, nt := bc.Thresholds, nc.Thresholds
	add("max safe queue limit", fmt.Sprintf("TTFT %s ≤ %s", bt.MaxSafeQueueStat, seconds(bt.MaxSafeQueueTTFTSeconds)),
		fmt.Sprintf("TTFT %s ≤ %s", nt.MaxSafeQueueStat, seconds(nt.MaxSafeQueueTTFTSeconds)))
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func gpuText(g *report.GPU) string {
	if g == nil {
		return ""
	}
	return fmt.Sprintf("%d× %s", max(g.Count, 1), g.Name)
}

func seconds(v float64) string {
	if v == 0 {
		return ""
	}
	return fmt.Sprintf("%g s", v)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// capacity compares the max safe queue depth and the use-case capacity of
// every scenario either run has. A capacity is placed between two measured
// N, so it changes only when it moves past a measured N (and by at least
// the practical floor): an interpolated ~131 against ~129 with 128 and 256
// measured is the same result at the ladder's resolution.
func (k comparer) capacity(base, cur *report.Report) []report.CapacityChange {
	var out []report.CapacityChange
	type entry struct {
		bound  sweep.Bound
		ladder []int
		note   string
	}
	collect := func(r *report.Report, kind string) map[string]entry {
		m := map[string]entry{}
		if kind == report.CapacityMaxSafeQueue {
			for _, q := range r.Capacity.MaxSafeQueue {
				m[q.Scenario] = entry{q.Bound, measured(r, q.Scenario, sweep.ModeBurst), fmt.Sprintf("TTFT %s ≤ %g s", q.Stat, q.ThresholdSeconds)}
			}
			return m
		}
		if kind == report.CapacityOn {
			for _, c := range r.Capacity.On {
				m[ruleKey(c.Scenario, c.Rule)] = entry{c.Bound, measured(r, c.Scenario, c.Mode), ""}
			}
			return m
		}
		if kind == report.CapacityConversations {
			for _, c := range r.Capacity.Conversations {
				m[c.Scenario] = entry{c.Bound, measured(r, c.Scenario, c.Mode), conversationLimits(c)}
			}
			return m
		}
		for _, u := range r.Capacity.UseCases {
			m[u.Scenario] = entry{u.Bound, measured(r, u.Scenario, u.Mode), ""}
		}
		return m
	}
	for _, kind := range []string{report.CapacityMaxSafeQueue, report.CapacityUseCase, report.CapacityOn, report.CapacityConversations} {
		bm, nm := collect(base, kind), collect(cur, kind)
		var names []string
		for _, list := range [][]string{capacityNames(cur, kind), capacityNames(base, kind)} {
			for _, n := range list {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
		for _, name := range names {
			b, inB := bm[name]
			n, inN := nm[name]
			cc := report.CapacityChange{Kind: kind, Scenario: name, Verdict: report.VerdictUnknown}
			if kind == report.CapacityOn {
				cc.Scenario, cc.Rule, _ = strings.Cut(name, "\x00")
			}
			switch {
			case inB && !inN:
				cc.Presence, cc.Base = report.OnlyInBase, &b.bound
			case inN && !inB:
				cc.Presence, cc.New = report.OnlyInNew, &n.bound
			default:
				cc.Presence, cc.Base, cc.New = report.InBoth, &b.bound, &n.bound
				if b.bound.Value > 0 {
					cc.Change = float64(n.bound.Value-b.bound.Value) / float64(b.bound.Value)
				}
				rb, rn := rungBelow(b.bound, b.ladder), rungBelow(n.bound, n.ladder)
				cc.Resolution = fmt.Sprintf("base %s, new %s", placeText(b.bound, b.ladder), placeText(n.bound, n.ladder))
				switch {
				case b.note != n.note:
					cc.Note = "judged against different limits: base " + b.note + ", new " + n.note
				case rb == rn || (b.bound.Value > 0 && abs(cc.Change) < k.o.PracticalFloor):
					cc.Verdict = report.VerdictNoChange
				case rn > rb:
					cc.Verdict = report.VerdictBetter
				default:
					cc.Verdict = report.VerdictWorse
				}
			}
			out = append(out, cc)
		}
	}
	return out
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

func capacityNames(r *report.Report, kind string) []string {
	var out []string
	if kind == report.CapacityMaxSafeQueue {
		for _, q := range r.Capacity.MaxSafeQueue {
			out = append(out, q.Scenario)
		}
		return out
	}
	if kind == report.CapacityOn {
		for _, c := range r.Capacity.On {
			out = append(out, ruleKey(c.Scenario, c.Rule))
		}
		return out
	}
	if kind == report.CapacityConversations {
		for _, c := range r.Capacity.Conversations {
			out = append(out, c.Scenario)
		}
		return out
	}
	for _, u := range r.Capacity.UseCases {
		out = append(out, u.Scenario)
	}
	return out
}

// conversationLimits names what a capacity in conversations was judged
// against, so that two runs judged against different limits (another hit
// share, TTFT threshold or statistic) get no verdict.
func conversationLimits(c report.ConversationCapacity) string {
	parts := []string{fmt.Sprintf("hit share ≥ %g", c.HitShare)}
	for _, l := range c.Limits {
		if l.Kind != report.LimitCache {
			parts = append(parts, fmt.Sprintf("%s %s ≤ %g", l.Kind, l.Stat, l.Threshold))
		}
	}
	return strings.Join(parts, ", ")
}

// ruleKey names a capacity on a rule among a report's: its scenario and
// its rule.
func ruleKey(scenario, rule string) string { return scenario + "\x00" + rule }

// measured returns the N a scenario measured in a mode, ascending.
func measured(r *report.Report, scenario string, m sweep.Mode) []int {
	var out []int
	for _, s := range r.Scenarios {
		if s.Name == scenario {
			for _, st := range s.Steps(m) {
				out = append(out, st.Concurrency)
			}
		}
	}
	slices.Sort(out)
	return out
}

// rungBelow is the largest measured N at or under the capacity (0 below
// the smallest); an "at least" capacity sits on its largest N.
func rungBelow(b sweep.Bound, ladder []int) int {
	r := 0
	for _, n := range ladder {
		if n <= b.Value {
			r = n
		}
	}
	return r
}

// placeText says where a capacity lies on the measured ladder.
func placeText(b sweep.Bound, ladder []int) string {
	switch {
	case len(ladder) == 0:
		return fmt.Sprintf("%d", b.Value)
	case b.AtLeast:
		return fmt.Sprintf("%d+ (every N up to %d passed)", b.Value, ladder[len(ladder)-1])
	case b.Value < ladder[0]:
		return fmt.Sprintf("below the smallest N measured (%d)", ladder[0])
	}
	lo := rungBelow(b, ladder)
	for _, n := range ladder {
		if n > lo {
			if lo == b.Value {
				return fmt.Sprintf("%d (measured; next N %d)", b.Value, n)
			}
			return fmt.Sprintf("~%d (between measured N=%d and N=%d)", b.Value, lo, n)
		}
	}
	return fmt.Sprintf("%d (the largest N measured)", b.Value)
}
