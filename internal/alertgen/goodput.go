package alertgen

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Goodput: the joint SLO. A probe is good when it got an answer and met every threshold of its
// scenario at once (slaprobe counts it in slaprobe_probes_good_total, judged as
// prober.Thresholds.MetBy says); the SLI is good probes ÷ probes, failed probes included. Only
// scenarios with at least one threshold are judged: without one, good is "answered", which
// SlaprobeProbeSuccessRateLow already watches.

// Goodput alert names.
const (
	GoodputPageAlert   = "SlaprobeGoodputBelowObjective"
	GoodputTicketAlert = "SlaprobeGoodputBudgetBurn"
)

func goodputBadName(w string) string {
	return "target_scenario:slaprobe_goodput_bad_probes:increase" + w
}
func goodputTotalName(w string) string { return "target_scenario:slaprobe_goodput_probes:increase" + w }
func goodputRatioName(w string) string {
	return "target_scenario:slaprobe_goodput_bad_probes:ratio_" + w
}

// withThreshold keeps the series of scenarios that have at least one SLA threshold.
const withThreshold = "and on (job, instance, scenario) slaprobe_sla_threshold > 0"

// goodputRecordingRules count probes, and probes that were not good, per window.
func goodputRecordingRules(p Params) []Rule {
	var out []Rule
	for i, wd := range p.windows() {
		w := dur(wd)
		total := Rule{Record: goodputTotalName(w), Expr: increase("slaprobe_probes_total", w) + "\n" + withThreshold + "\n"}
		if i == 0 {
			total.Comment = "Goodput SLO: the share of probes that got an answer and met every threshold of their scenario\n" +
				"at once (slaprobe_probes_good_total), per window; failed probes count as bad. Only scenarios with a\n" +
				"threshold. An increase of the good counter over the window can exceed that of all probes by a\n" +
				"fraction through extrapolation: clamped at zero."
		}
		bad := Rule{Record: goodputBadName(w), Expr: fmt.Sprintf("clamp_min(\n  %s\n  - on (%s)\n  %s,\n  0\n)\n%s\n",
			increase("slaprobe_probes_total", w), by, increase("slaprobe_probes_good_total", w), withThreshold)}
		out = append(out, total, bad)
		if p.isShort(wd) {
			out = append(out, Rule{
				Record: goodputRatioName(w),
				Expr:   fmt.Sprintf("%s\n/ on (%s)\n(%s > 0)\n", goodputBadName(w), by, goodputTotalName(w)),
			})
		}
	}
	return out
}

// goodputTierExpr is one tier's condition; its value is the long window's burn rate.
func (p Params) goodputTierExpr(t Tier) string {
	budget := fmt.Sprintf("%.6g", 1-p.GoodputObjective)
	long, short := dur(t.Long), dur(t.Short)
	return fmt.Sprintf(`(
  %s
  / on (%s)
  clamp_min(%s, %d)
) / %s > %s
and on (%s)
last_over_time(%s[%s]) / %s > %s`,
		goodputBadName(long), by, goodputTotalName(long), t.MinProbes, budget, num(t.Burn),
		by, goodputRatioName(short), long, budget, num(t.Burn))
}

func (p Params) goodputAlert(name, severity string, tiers []Tier) Rule {
	objective := strconv.FormatFloat(p.GoodputObjective*100, 'f', -1, 64) + " %"
	long := dur(tiers[0].Long)
	var parts []string
	for _, t := range tiers {
		parts = append(parts, "(\n"+indent(p.goodputTierExpr(t), 2)+"\n)")
	}
	sel := `{job=%q,instance=%q,target=%q,scenario=%q}`
	args := `$labels.job $labels.instance $labels.target $labels.scenario`
	good := fmt.Sprintf(`{{ with printf "1 - %s%s / %s%s" %s %s | query }}{{ . | first | value | humanizePercentage }}{{ end }}`,
		goodputBadName(long), sel, goodputTotalName(long), sel, args, args)
	thresholds := `{{ range $i, $t := printf "slaprobe_sla_threshold{job=%q,instance=%q,scenario=%q}" $labels.job $labels.instance $labels.scenario | query | sortByLabel "metric" }}` +
		`{{ if $i }}, {{ end }}{{ with $t.Labels.metric }}{{ if eq . "decode_tokens_per_second" }}decode speed ≥ {{ $t.Value | printf "%.1f" }} tokens/s` +
		`{{ else if eq . "ttft_seconds" }}TTFT ≤ {{ $t.Value | humanizeDuration }}{{ else if eq . "itl_seconds" }}ITL ≤ {{ $t.Value | humanizeDuration }}` +
		`{{ else if eq . "e2e_latency_seconds" }}E2E ≤ {{ $t.Value | humanizeDuration }}{{ else }}{{ . }} {{ $t.Value }}{{ end }}{{ end }}{{ end }}`
	return Rule{
		Alert: name,
		// Failed probes are not good: an engine put to sleep on purpose would burn the budget. Quiet
		// while a short window still holds a probe of its sleep.
		Expr:   unlessAsleep("(\n"+indent(strings.Join(parts, "\nor\n"), 2)+"\n)\n", dur(longestShort(tiers))),
		For:    dur(tiers[0].For),
		Labels: map[string]string{"severity": severity},
		Annotations: map[string]string{
			"summary": "Goodput of {{ $labels.scenario }} on {{ $labels.target }} is below its objective.",
			"description": fmt.Sprintf("Too few probes of scenario {{ $labels.scenario }} on target {{ $labels.target }} (model {{ $labels.model }}) "+
				"meet every threshold of the scenario at once (%s): only %s of the probes of the last %s were good, "+
				"so the error budget of the %s goodput objective burns {{ $value | printf \"%%.1f\" }} times too fast "+
				"(windows: %s), and the latest probes are still not good. Each metric on its own may be within its SLO: "+
				"the bad probes can break different thresholds.",
				thresholds, good, long, objective, windowsOf(tiers)),
			"runbook_url": RunbookBase + "#" + strings.ToLower(name),
		},
	}
}

// goodputAlerts are the joint SLO's burn-rate alerts: a page and a ticket per scenario.
func goodputAlerts(p Params) []Rule {
	page := p.goodputAlert(GoodputPageAlert, "critical", p.Page)
	page.Comment = "---------------------------------------------------------------------------------------------\n" +
		"Goodput burn rate: the joint SLO. A probe is good when it got an answer and met every threshold of its\n" +
		"scenario at once; a server whose probes each break a different threshold passes every per-metric SLO\n" +
		"above and fails this one. Same tiers and probe floor as the per-metric alerts."
	out := []Rule{page}
	if len(p.Ticket) > 0 {
		out = append(out, p.goodputAlert(GoodputTicketAlert, "warning", p.Ticket))
	}
	return out
}

// longestShort is the longest short window of tiers.
func longestShort(tiers []Tier) time.Duration {
	var d time.Duration
	for _, t := range tiers {
		d = max(d, t.Short)
	}
	return d
}
