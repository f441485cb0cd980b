package render

// This file holds what the report says about conversation scenarios: how
// many concurrent conversations the server carries, and the chart of
// follow-up TTFT and the cached share against the number of conversations.

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/internal/svgchart"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

const (
	colorFollowUp  = "#0072B2"
	colorPriming   = "#D55E00"
	colorHitShare  = "#009E73"
	colorCachedAvg = "#CC79A7"
)

// conversationLimitText describes one limit of the capacity in
// conversations: "follow-up TTFT mean ≤ 2 s", "≥ 90% of follow-ups hit the cache".
func conversationLimitText(l report.Limit) string {
	switch l.Kind {
	case report.LimitCache:
		return "≥ " + fmtPct(l.Threshold) + " of follow-ups hit the prefix cache"
	case report.LimitTTFT:
		return fmt.Sprintf("follow-up TTFT %s ≤ %s", l.Stat, fmtSecondsShort(l.Threshold))
	}
	return limitText(l.Kind, l.Threshold)
}

// conversationLimitName names the binding limit in prose.
func conversationLimitName(kind string) string {
	switch kind {
	case report.LimitCache:
		return "the share of follow-ups that hit the prefix cache"
	case report.LimitTTFT:
		return "follow-up TTFT"
	case "success":
		return "the success ratio"
	}
	return limitName(kind)
}

// ConversationSentence states a conversation scenario's capacity: "This
// server carries 4 concurrent agent conversations (…)".
func ConversationSentence(c report.ConversationCapacity) string {
	var limits []string
	for _, l := range c.Limits {
		limits = append(limits, conversationLimitText(l))
	}
	cond := ""
	if len(limits) > 0 {
		cond = " (" + strings.Join(limits, ", ") + ")"
	}
	switch {
	case c.AtLeast:
		return fmt.Sprintf("This server carries at least %d concurrent %s conversations%s: every N tested, up to %d, kept within the limits.",
			c.Value, c.Scenario, cond, c.MaxTested)
	case c.Value <= 0:
		return fmt.Sprintf("This server carries fewer than one concurrent %s conversation%s: even the smallest N tested broke %s.",
			c.Scenario, cond, conversationLimitName(c.LimitedBy))
	}
	between := ""
	if len(c.Between) == 2 {
		between = fmt.Sprintf(", between the steps N=%d and N=%d", c.Between[0], c.Between[1])
	}
	return fmt.Sprintf("This server carries %s concurrent %s conversations%s; beyond that %s crosses its limit%s.",
		fmtBound(c.Bound), c.Scenario, cond, conversationLimitName(c.LimitedBy), between)
}

// conversationTable lists the capacity in conversations of every
// conversation scenario.
func conversationTable(r *report.Report) table {
	t := table{Class: "capacity",
		Head:    []string{"scenario", "concurrent conversations", "limited by", "limits", "tested up to"},
		Numeric: []bool{false, true, false, false, true}}
	compared := r.Comparison != nil
	if compared {
		t.Head, t.Numeric = append(t.Head, "change vs base"), append(t.Numeric, false)
	}
	for _, c := range r.Capacity.Conversations {
		var limits []string
		for _, l := range c.Limits {
			limits = append(limits, conversationLimitText(l)+": "+fmtBound(l.Bound))
		}
		row := []string{c.Scenario, fmtBound(c.Bound), orDash(conversationLimitName(c.LimitedBy)), orDash(strings.Join(limits, "; ")),
			fmt.Sprintf("N=%d", c.MaxTested)}
		if c.LimitedBy == "" {
			row[2] = "–"
		}
		if compared {
			row = append(row, orDash(capacityChangeText(r.Comparison.CapacityOf(report.CapacityConversations, c.Scenario))))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// figConversations draws, for each conversation scenario with closed-loop
// steps, its follow-ups' TTFT (mean and p95) and its priming turns' TTFT on
// the left axis, and the share of follow-ups that hit the cache and their
// mean cached share on the right, against the number of conversations in
// flight, with the capacity in conversations marked.
func figConversations(r *report.Report) []figure {
	var out []figure
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		steps := okSteps(s.ClosedLoop)
		if s.Turns == 0 || len(steps) == 0 {
			continue
		}
		f := figure{Chart: slo.ChartConversations, DOMID: "chart-conversations-" + slugify(s.Name), Scenario: s.Name,
			Title: "Concurrent conversations: " + s.Name,
			How: fmt.Sprintf("%d turns per conversation: %s in, then %s more per follow-up, %s out each. "+
				"N conversations are in flight (a new one starts when one ends). Left axis (log scale): time to first token of the follow-ups (mean and p95) and of the cold priming turns (mean). "+
				"Right axis: the share of follow-ups that found at least 90%% of their conversation in the prefix cache, and the mean cached share. "+
				"When the KV cache can no longer hold every conversation’s history, the engine evicts some between turns: the hit share falls and follow-up TTFT climbs towards the cold one.",
				s.Turns, fmtTokens(float64(s.InputTokens)), fmtTokens(float64(s.NewTokens)), grouped(float64(s.OutputTokens), 0))}
		var cc *report.ConversationCapacity
		for j := range r.Capacity.Conversations {
			if r.Capacity.Conversations[j].Scenario == s.Name {
				cc = &r.Capacity.Conversations[j]
			}
		}
		stat := sweep.StatMean
		if cc != nil {
			for _, l := range cc.Limits {
				if l.Kind == report.LimitTTFT && l.Stat != "" {
					stat = l.Stat
				}
			}
		}
		f.SVG, f.Legend = conversationChart(f.DOMID, s, cc, stat, baseScenario(r, s))
		if cc != nil {
			f.Findings = append(f.Findings, ConversationSentence(*cc))
		}
		if hi := steps[len(steps)-1]; hi.Conversation != nil && hi.Conversation.PrimingTTFT.Mean > 0 {
			f.Findings = append(f.Findings, fmt.Sprintf("At N=%d, follow-ups waited %s for their first token on average, against %s for a cold priming turn; %s.",
				hi.Concurrency, fmtSeconds(hi.TTFT.Mean), fmtSeconds(hi.Conversation.PrimingTTFT.Mean), hitText(hi.Conversation)))
		}
		out = append(out, f)
	}
	return out
}

func hitText(cs *sweep.ConversationStep) string {
	if cs.HitShare == nil {
		return "the server reported no cached tokens, so the cache share is unknown"
	}
	return fmt.Sprintf("%s of the follow-ups hit the cache (%d hit, %d partial, %d miss)", fmtPct(*cs.HitShare), cs.Hit, cs.Partial, cs.Miss)
}

func conversationChart(id string, s *report.Scenario, cc *report.ConversationCapacity, stat sweep.Stat, base *report.Scenario) (template.HTML, template.HTML) {
	var ns []float64
	mk := func() (svgchart.Series, svgchart.Series, svgchart.Series, svgchart.Series, svgchart.Series) {
		return svgchart.Series{Name: "follow-up TTFT " + string(stat), Color: colorFollowUp, Marker: 0},
			svgchart.Series{Name: "follow-up TTFT p95", Color: colorFollowUp, Marker: 0, Dashed: true},
			svgchart.Series{Name: "priming (cold) TTFT mean", Color: colorPriming, Marker: 1},
			svgchart.Series{Name: "follow-ups hitting the cache (right axis)", Color: colorHitShare, Marker: 2, Right: true},
			svgchart.Series{Name: "mean cached share (right axis)", Color: colorCachedAvg, Marker: 3, Right: true, Dashed: true}
	}
	fill := func(steps []report.Step, tipPrefix string, fu, p95, prime, hit, cached *svgchart.Series) {
		for _, st := range okSteps(steps) {
			cs := st.Conversation
			if cs == nil {
				continue
			}
			n := float64(st.Concurrency)
			if v := st.TTFT.Stat(stat); v > 0 {
				fu.Points = append(fu.Points, svgchart.Point{X: n, Y: v, Suspect: st.StartedBusy(),
					Tip: fmt.Sprintf("%sN=%d · follow-up TTFT %s %s over %d follow-ups%s", tipPrefix, st.Concurrency, stat, fmtSeconds(v), cs.FollowUps, suspectTip(st))})
			}
			if v := st.TTFT.P95; v > 0 {
				p95.Points = append(p95.Points, svgchart.Point{X: n, Y: v, Suspect: st.StartedBusy(),
					Tip: fmt.Sprintf("%sN=%d · follow-up TTFT p95 %s", tipPrefix, st.Concurrency, fmtSeconds(v))})
			}
			if v := cs.PrimingTTFT.Mean; v > 0 {
				prime.Points = append(prime.Points, svgchart.Point{X: n, Y: v, Suspect: st.StartedBusy(),
					Tip: fmt.Sprintf("%sN=%d · priming TTFT mean %s", tipPrefix, st.Concurrency, fmtSeconds(v))})
			}
			if cs.HitShare != nil {
				hit.Points = append(hit.Points, svgchart.Point{X: n, Y: *cs.HitShare, Suspect: st.StartedBusy(),
					Tip: fmt.Sprintf("%sN=%d · %s", tipPrefix, st.Concurrency, hitText(cs))})
				cached.Points = append(cached.Points, svgchart.Point{X: n, Y: cs.CachedShare, Suspect: st.StartedBusy(),
					Tip: fmt.Sprintf("%sN=%d · mean cached share %s", tipPrefix, st.Concurrency, fmtPct(cs.CachedShare))})
			}
		}
	}
	fu, p95, prime, hit, cached := mk()
	fill(s.ClosedLoop, "", &fu, &p95, &prime, &hit, &cached)
	for _, st := range okSteps(s.ClosedLoop) {
		ns = append(ns, float64(st.Concurrency))
	}
	c := svgchart.Chart{ID: id, Title: "Concurrent conversations: " + s.Name,
		X: nAxis("concurrent conversations (N, closed loop)", ns),
		// Log, as on every capacity chart: a follow-up that hits the cache
		// and one that prefills its whole history again lie an order of
		// magnitude apart, and both must stay readable.
		Y:     svgchart.Axis{Label: "time to first token (log scale)", Log: true, Fmt: svgchart.TickSeconds},
		Y2:    &svgchart.Axis{Label: "share of follow-ups", Min: 0, Max: 1, Fmt: tickShare},
		Empty: "No closed-loop step of this conversation scenario measured a follow-up."}
	for _, sr := range []svgchart.Series{fu, p95, prime, hit, cached} {
		if len(sr.Points) > 0 {
			c.Series = append(c.Series, sr)
		}
	}
	if base != nil {
		// The baseline's two figures the capacity reads, faint beside NEW's.
		bfu, bp95, bprime, bhit, bcached := mk()
		bfu, bhit = baseOf(bfu), baseOf(bhit)
		fill(base.ClosedLoop, "base · ", &bfu, &bp95, &bprime, &bhit, &bcached)
		for _, sr := range []svgchart.Series{bfu, bhit} {
			if len(sr.Points) > 0 {
				c.Series = append(c.Series, sr)
			}
		}
	}
	if t := s.Thresholds.TTFT.Seconds(); t > 0 {
		c.Refs = append(c.Refs, svgchart.RefLine{Value: t, Color: colorFollowUp, Label: "follow-up " + limitText(report.LimitTTFT, t)})
	}
	if cc != nil {
		if cc.HitShare > 0 {
			c.Refs = append(c.Refs, svgchart.RefLine{Value: cc.HitShare, Right: true, Color: colorHitShare, Label: "hit share ≥ " + fmtPct(cc.HitShare)})
		}
		if cc.Value > 0 {
			c.Refs = append(c.Refs, svgchart.RefLine{Value: float64(cc.Value), Vertical: true, Color: colorCapacityMrk, Label: "carries " + fmtBound(cc.Bound)})
		}
	}
	// No SeparateRefs: it stretches the axes of a capacity chart's layout
	// (a linear left axis from zero), and the share axis here must keep
	// 0–100 %.
	c.SuspectNote = suspectNote
	return c.SVG(), c.LegendHTML()
}

// tickShare labels a tick of a share: "0%", "50%", "100%".
func tickShare(v float64) string {
	return strconv.FormatFloat(svgchart.Clean(v*100), 'f', -1, 64) + "%"
}

// conversationStepsTable lists, for every closed-loop step of a
// conversation scenario, its follow-ups' TTFT, its priming turns' TTFT and
// the follow-ups' cache.
func conversationStepsTable(r *report.Report) table {
	t := table{Class: "steps",
		Head:    []string{"scenario", "N", "conversations", "follow-up TTFT mean", "p50", "p95", "priming TTFT mean", "hit / partial / miss / unknown", "hit share", "mean cached share"},
		Numeric: []bool{false, true, true, true, true, true, true, true, true, true}}
	for i := range r.Scenarios {
		s := &r.Scenarios[i]
		for _, st := range okSteps(s.ClosedLoop) {
			cs := st.Conversation
			if cs == nil {
				continue
			}
			hit, cached := "–", "–"
			if cs.HitShare != nil {
				hit, cached = fmtPct(*cs.HitShare), fmtPct(cs.CachedShare)
			}
			t.Rows = append(t.Rows, []string{s.Name, fmt.Sprint(st.Concurrency), fmt.Sprint(cs.Conversations),
				fmtSeconds(st.TTFT.Mean), fmtSeconds(st.TTFT.P50), fmtSeconds(st.TTFT.P95), fmtSeconds(cs.PrimingTTFT.Mean),
				fmt.Sprintf("%d / %d / %d / %d", cs.Hit, cs.Partial, cs.Miss, cs.Unknown), hit, cached})
		}
	}
	return t
}
