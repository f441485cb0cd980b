package alertgen

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/slaprobe/slaprobe/internal/slo"
)

// by is the label set every probe rule keeps.
const by = "job, instance, target, model, scenario, api"

// sloMetric is one SLA metric of slaprobe_sla_threshold{metric} and the probe histogram it judges.
type sloMetric struct {
	metric string // value of slaprobe_sla_threshold's metric label
	hist   string // probe histogram
	// edges are the histogram's classic bucket bounds (internal/slo, which the collector exports).
	// Every default threshold is an edge, so "probes within the threshold" is an exact count.
	edges []float64
	// minimum: the threshold is a floor (decode speed); the bad probes are those at or under it.
	minimum bool

	page, ticket string // alert names
	what         string // in sentences: "TTFT"
	// value formats a threshold in a template: a duration, or tokens/s.
	value string
}

var sloMetrics = []sloMetric{
	{metric: "ttft_seconds", hist: "slaprobe_ttft_seconds",
		edges: slo.TTFTBuckets,
		page:  "SlaprobeTTFTAboveMaxSafe", ticket: "SlaprobeTTFTBudgetBurn", what: "time to first token",
		value: "humanizeDuration"},
	{metric: "itl_seconds", hist: "slaprobe_itl_seconds",
		edges: slo.ITLBuckets,
		page:  "SlaprobeITLAboveThreshold", ticket: "SlaprobeITLBudgetBurn", what: "inter-token latency",
		value: "humanizeDuration"},
	{metric: "e2e_latency_seconds", hist: "slaprobe_e2e_latency_seconds",
		edges: slo.E2EBuckets,
		page:  "SlaprobeE2ELatencyAboveThreshold", ticket: "SlaprobeE2ELatencyBudgetBurn", what: "end-to-end latency",
		value: "humanizeDuration"},
	{metric: "decode_tokens_per_second", hist: "slaprobe_decode_tokens_per_second", minimum: true,
		edges: slo.DecodeBuckets,
		page:  "SlaprobeDecodeSpeedBelowThreshold", ticket: "SlaprobeDecodeSpeedBudgetBurn", what: "per-user decode speed",
		value: `printf "%.1f tokens/s"`},
}

// num formats a bound as PromQL and client_golang write it.
func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n")
}

func increase(series, w string) string {
	return fmt.Sprintf("sum by (%s) (increase(%s[%s]))", by, series, w)
}

// threshold selects the scenario's threshold on m where cond holds ("> 3", ">= 1 < 1.5", …).
func (m sloMetric) threshold(cond string) string {
	return fmt.Sprintf(`and on (job, instance, scenario) (slaprobe_sla_threshold{metric="%s"} %s)`, m.metric, cond)
}

// boundName records, per scenario and SLA metric, the bucket bound that judges the scenario's
// threshold, as label le in Prometheus 2's spelling ("3"); badExpr adds Prometheus 3's ("3.0").
// The threshold is a value, not a label: this rule turns it into one, once per evaluation, so each
// window's bad-probe rule reads its histogram's buckets with one selector and one join.
const boundName = "scenario:slaprobe_sla_threshold:bucket_bound"

// boundExpr picks m's bound for each threshold. For a threshold between two bounds the stricter is
// used (probes between it and the threshold count as bad): the count stays exact at every bound and
// errs toward alerting elsewhere. A latency threshold under every bound, or a minimum above every
// bound, has no bucket: badExpr counts every probe as bad there.
func (m sloMetric) boundExpr() string {
	sel := fmt.Sprintf(`slaprobe_sla_threshold{metric="%s"}`, m.metric)
	var terms []string
	add := func(f float64, cond string) {
		terms = append(terms, fmt.Sprintf(`label_replace(%s %s, "le", "%s", "", "")`, sel, cond, num(f)))
	}
	e := m.edges
	if m.minimum {
		// Bad: at or under the threshold. Use the smallest bound at or above it.
		add(e[0], "<= "+num(e[0]))
		for i := 1; i < len(e); i++ {
			add(e[i], fmt.Sprintf("> %s <= %s", num(e[i-1]), num(e[i])))
		}
		return strings.Join(terms, "\nor\n")
	}
	// Good: at or under the threshold. Use the largest bound at or under it.
	for i := range e {
		cond := ">= " + num(e[i])
		if i+1 < len(e) {
			cond += " < " + num(e[i+1])
		}
		add(e[i], cond)
	}
	return strings.Join(terms, "\nor\n")
}

// badExpr counts the probes outside the threshold over window w, per probe series, from the bucket
// at the bound boundName picked.
func (m sloMetric) badExpr(w string) string {
	count := increase(m.hist+"_count", w)
	bound := fmt.Sprintf(`%s{metric="%s"}`, boundName, m.metric)
	atBound := fmt.Sprintf("sum by (%s) (\n  increase(%s_bucket[%s])\n  and on (job, instance, scenario, le)\n  (%s or label_replace(%s, \"le\", \"$1.0\", \"le\", \"([0-9]+)\"))\n)",
		by, m.hist, w, bound, bound)
	if m.minimum {
		// Above every bound: no bucket tells; every probe counts as bad.
		return fmt.Sprintf("label_replace(\n%s,\n  \"metric\", \"%s\", \"\", \"\"\n)", indent(atBound+"\nor\n"+count+"\n"+
			m.threshold("> "+num(m.edges[len(m.edges)-1])), 2), m.metric)
	}
	// Good: the probes at or under the bound; bad = all - good. Under every bound: no probe is
	// known to be within it.
	good := atBound + "\nor\n0 * " + count + "\n" + m.threshold("< "+num(m.edges[0]))
	return fmt.Sprintf("label_replace(\n  %s\n  - on (%s)\n  (\n%s\n  ),\n  \"metric\", \"%s\", \"\", \"\"\n)",
		count, by, indent(good, 4), m.metric)
}

// totalExpr counts the probes that measured m over window w, where m has a threshold.
func (m sloMetric) totalExpr(w string) string {
	return fmt.Sprintf("label_replace(%s, \"metric\", \"%s\", \"\", \"\")\n%s",
		increase(m.hist+"_count", w), m.metric, m.threshold("> 0"))
}

func badName(w string) string   { return "target_scenario:slaprobe_sla_bad_probes:increase" + w }
func totalName(w string) string { return "target_scenario:slaprobe_sla_probes:increase" + w }
func ratioName(w string) string { return "target_scenario:slaprobe_sla_bad_probes:ratio_" + w }

// isShort says whether w is some tier's short window: those get a ratio rule.
func (p Params) isShort(w time.Duration) bool {
	for _, t := range append(append([]Tier(nil), p.Page...), p.Ticket...) {
		if t.Short == w {
			return true
		}
	}
	return false
}

// sliRecordingRules count probes, and bad probes, per window and SLA metric.
func sliRecordingRules(p Params) []Rule {
	var bounds []string
	for _, m := range sloMetrics {
		bounds = append(bounds, m.boundExpr())
	}
	out := []Rule{{
		Comment: "SLO: the bucket bound (label le) that judges each scenario's threshold, per SLA metric; the\n" +
			"bad-probe rules below join on it. It must come before them in the group.",
		Record: boundName,
		Expr:   strings.Join(bounds, "\nor\n") + "\n",
	}}
	for i, wd := range p.windows() {
		w := dur(wd)
		var total, bad []string
		for _, m := range sloMetrics {
			total = append(total, m.totalExpr(w))
			bad = append(bad, m.badExpr(w))
		}
		r := Rule{Record: totalName(w), Expr: strings.Join(total, "\nor\n") + "\n"}
		if i == 0 {
			r.Comment = "SLO: the share of probes within the scenario's threshold, from probe counts.\n" +
				"Per window and SLA metric (label metric, as in slaprobe_sla_threshold): the probes that measured\n" +
				"the metric, and those outside the threshold. Only where the scenario has a threshold on it.\n" +
				"Counted from the classic buckets, whose bounds include every default threshold; Prometheus must\n" +
				"ingest them (with native histograms on, set scrape_classic_histograms: true)."
		}
		out = append(out, r, Rule{Record: badName(w), Expr: strings.Join(bad, "\nor\n") + "\n"})
		if p.isShort(wd) {
			out = append(out, Rule{
				Comment: fmt.Sprintf("Share of bad probes over %s, only where a probe ran in it: the alerts read the latest\n"+
					"value, so a scenario probed less often than every %s keeps the verdict of its last probes.", w, w),
				Record: ratioName(w),
				Expr: fmt.Sprintf("%s\n/ on (%s, metric)\n(%s > 0)\n",
					badName(w), by, totalName(w)),
			})
		}
	}
	return out
}

// tierExpr is one tier's condition for metric m; its value is the long window's burn rate.
func (p Params) tierExpr(m sloMetric, t Tier) string {
	budget := fmt.Sprintf("%.6g", 1-p.Objective)
	long, short := dur(t.Long), dur(t.Short)
	sel := fmt.Sprintf(`{metric="%s"}`, m.metric)
	return fmt.Sprintf(`(
  %s%s
  / on (%s, metric)
  clamp_min(%s%s, %d)
) / %s > %s
and on (%s, metric)
last_over_time(%s%s[%s]) / %s > %s`,
		badName(long), sel, by, totalName(long), sel, t.MinProbes, budget, num(t.Burn),
		by, ratioName(short), sel, long, budget, num(t.Burn))
}

func (p Params) alertExpr(m sloMetric, tiers []Tier) string {
	var parts []string
	for _, t := range tiers {
		parts = append(parts, "(\n"+indent(p.tierExpr(m, t), 2)+"\n)")
	}
	return strings.Join(parts, "\nor\n") + "\n"
}

func windowsOf(tiers []Tier) string {
	var ws []string
	for _, t := range tiers {
		ws = append(ws, fmt.Sprintf("%s (confirmed over %s) at %s×", dur(t.Long), dur(t.Short), num(t.Burn)))
	}
	return strings.Join(ws, " or ")
}

func (p Params) sliAlert(m sloMetric, name, severity string, tiers []Tier) Rule {
	objective := strconv.FormatFloat(p.Objective*100, 'f', -1, 64) + " %"
	long := dur(tiers[0].Long)
	thr := fmt.Sprintf(`{{ with printf "slaprobe_sla_threshold{job=%%q,instance=%%q,scenario=%%q,metric=\"%s\"}" $labels.job $labels.instance $labels.scenario | query }}{{ . | first | value | %s }}{{ end }}`,
		m.metric, m.value)
	share := fmt.Sprintf(`{{ with printf "%s{job=%%q,instance=%%q,target=%%q,scenario=%%q,metric=\"%s\"} / %s{job=%%q,instance=%%q,target=%%q,scenario=%%q,metric=\"%s\"}" $labels.job $labels.instance $labels.target $labels.scenario $labels.job $labels.instance $labels.target $labels.scenario | query }}{{ . | first | value | humanizePercentage }}{{ end }}`,
		badName(long), m.metric, totalName(long), m.metric)
	dir, limit := "above", "limit"
	if m.minimum {
		dir, limit = "below", "minimum"
	}
	summary := fmt.Sprintf("%s of {{ $labels.scenario }} on {{ $labels.target }} is %s its threshold.", upperFirst(m.what), dir)
	if m.metric == "ttft_seconds" && severity == "critical" {
		summary = "TTFT above the max-safe threshold: {{ $labels.scenario }} on {{ $labels.target }}."
	}
	return Rule{
		Alert: name,
		Expr:  p.alertExpr(m, tiers),
		For:   dur(tiers[0].For),
		Labels: map[string]string{
			"severity": severity,
		},
		Annotations: map[string]string{
			"summary": summary,
			"description": fmt.Sprintf("Probes of scenario {{ $labels.scenario }} on target {{ $labels.target }} (model {{ $labels.model }}) "+
				"miss the scenario's %s %s of %s so often that the error budget of the %s objective burns "+
				"{{ $value | printf \"%%.1f\" }} times too fast (windows: %s), and the latest probes still do. "+
				"%s of the probes of the last %s were outside the threshold.",
				m.what, limit, thr, objective, windowsOf(tiers), share, long),
			"runbook_url": RunbookBase + "#" + strings.ToLower(name),
		},
	}
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// sliAlerts are the burn-rate alerts: a page and a ticket per SLA metric.
func sliAlerts(p Params) []Rule {
	var out []Rule
	for i, m := range sloMetrics {
		page := p.sliAlert(m, m.page, "critical", p.Page)
		if i == 0 {
			page.Comment = "---------------------------------------------------------------------------------------------\n" +
				"SLA burn rate: what users of the server feel. Fires while the share of probes outside the\n" +
				"threshold spends the error budget too fast over a long window and over the latest short window\n" +
				"that held a probe. The long window divides by at least MinProbes probes, so one slow probe of a\n" +
				"rarely probed scenario never fires; a sustained breach does (docs/alerts.md has the timings)."
		}
		out = append(out, page)
		if len(p.Ticket) > 0 {
			out = append(out, p.sliAlert(m, m.ticket, "warning", p.Ticket))
		}
	}
	return out
}
