package render

import (
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// page is what the HTML template sees. Every user-provided string stays a
// plain string so html/template escapes it; only the SVG and legends (built
// by internal/svgchart, which escapes every text) are template.HTML.
type page struct {
	Title         string
	Subtitle      string
	Meta          []kv
	Notes         []string
	Headline      []tile
	Sections      []section
	Appendix      []appendixEntry
	Bands         []bandRow
	SchemaVersion string
	ToolVersion   string
	Generated     string
	Methodology   []kv
	Kicker        string
	Compare       *compareView
}

type kv struct{ K, V string }

type appendixEntry struct {
	ID, Name, Info string
	Tables         []table
	Notes          []string
}

type bandRow struct {
	Metric string
	Cells  [4]string
}

var pageTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"inc": func(i int) int { return i + 1 },
	"rowClass": func(t *table, i int) string {
		if i < len(t.RowClass) {
			return t.RowClass[i]
		}
		return ""
	},
	"align": func(t *table, i int) string {
		var cls []string
		if i < len(t.Numeric) && t.Numeric[i] {
			cls = append(cls, "num")
		}
		if i > 0 && t.groupStart(i) {
			cls = append(cls, "gs")
		}
		return strings.Join(cls, " ")
	},
}).Parse(htmlTemplate))

// RenderHTML writes the self-contained HTML report.
func RenderHTML(w io.Writer, r *report.Report) error {
	r = report.Prepared(r)
	return pageTmpl.Execute(w, buildPage(r))
}

func buildPage(r *report.Report) page {
	m := r.Meta
	p := page{
		Title:         reportTitle(r),
		SchemaVersion: report.SchemaVersion,
		ToolVersion:   m.ToolVersion,
		Notes:         r.Notes,
		Kicker:        "slaprobe benchmark report",
		Compare:       buildCompareView(r),
	}
	if r.Comparison != nil {
		p.Kicker = "slaprobe comparison report"
	}
	var sub []string
	if m.Model != "" && !strings.Contains(p.Title, m.Model) {
		sub = append(sub, m.Model)
	}
	if m.GPU != nil && m.GPU.Name != "" {
		sub = append(sub, fmt.Sprintf("%d× %s", max(m.GPU.Count, 1), m.GPU.Name))
	}
	if m.Engine != "" {
		e := m.Engine
		if m.EngineVersion != "" {
			e += " " + m.EngineVersion
		}
		sub = append(sub, e)
	}
	p.Subtitle = strings.Join(sub, " · ")
	p.Meta = metaRows(r)
	if m.Interrupted {
		p.Notes = append([]string{"This run was interrupted: the report holds only the steps measured before it stopped."}, p.Notes...)
	}
	drain := summarizeDrain(r)
	p.Notes = append(p.Notes, drain.notes()...)
	p.Headline = headlineTiles(r)
	p.Sections = buildSections(r)
	p.Appendix = appendix(r)
	for _, b := range []slo.Bands{slo.ITLBands, slo.TTFTBands, slo.DecodeBands, slo.EfficiencyBands} {
		p.Bands = append(p.Bands, bandRow{b.Metric, b.Text})
	}
	p.Methodology = []kv{
		{"TTFT", "request sent → first streamed token: queueing, scheduling and prefill."},
		{"Decode speed", "per request, (output tokens − 1) ÷ (last token − first token)."},
		{"ITL", "per request, (last token − first token) ÷ (output tokens − 1): the reciprocal of decode speed."},
		{"E2E latency", "TTFT + decode time: what a user waits for the whole answer."},
		{"System throughput", "output tokens per second summed over all streams in the measured window; prompt tokens excluded."},
		{"Scaling efficiency", "system throughput ÷ (N=1 throughput × N)."},
		{"Prefill speed", "prompt tokens ÷ (TTFT − queue wait when the engine reports it)."},
		{"Queue wait", "the change of the engine’s vllm:request_queue_time_seconds over the step, per request."},
	}
	if t := drain.methodText(); t != "" {
		p.Methodology = append(p.Methodology, kv{"Step start", t})
	}
	p.Methodology = append(p.Methodology,
		kv{"Percentiles", "plain percentiles of the per-request values. For latencies (ITL, TTFT, E2E) the tail that hurts is the high end, so the tables show p90 and p99; for decode speed it is the low end, so they show p10 and p1: the speed the slowest 10% and 1% of requests got."})
	conversations := false
	for _, s := range r.Scenarios {
		conversations = conversations || s.Turns > 0
	}
	switch {
	case conversations:
		p.Methodology = append(p.Methodology, kv{"Prompt caching", "cold scenarios carry a fresh context on every request, so their TTFT is the worst case. A conversation scenario’s conversation keeps one context: its first, priming turn is cold, and each follow-up re-sends the whole history plus new tokens, so it finds the history in the prefix cache unless the engine evicted it. Its steps hold N conversations in flight, and their figures are the follow-ups’; the priming turns are kept apart."})
	case !r.Config.PromptCaching:
		p.Methodology = append(p.Methodology, kv{"Prompt caching", "off: every request carries a fresh context, so TTFT is the worst case. With a warm prefix cache a long conversation answers about as fast as its newest turn."})
	}
	if r.Comparison != nil && !isHeadroomOnly(r) {
		p.Methodology = append(p.Methodology, compareMethod(r.Comparison))
	}
	if isHeadroomOnly(r) {
		p.Kicker = strings.Replace(p.Kicker, "benchmark", "headroom", 1)
		p.Headline, p.Bands = headroomTiles(r), nil
		p.Methodology = headroomMethod(r)
	}
	p.Generated = m.FinishedAt.UTC().Format(time.RFC3339)
	return p
}

func reportTitle(r *report.Report) string {
	if c := r.Comparison; c != nil {
		return baseTitle(r) + " compared with " + c.BaseLabel
	}
	return baseTitle(r)
}

func baseTitle(r *report.Report) string {
	if r.Meta.Title != "" {
		return r.Meta.Title
	}
	if r.Headroom != nil {
		return headroomTitle(r)
	}
	if r.Meta.Model != "" {
		return r.Meta.Model + " benchmark"
	}
	return "slaprobe benchmark"
}

func metaRows(r *report.Report) []kv {
	m := r.Meta
	var rows []kv
	add := func(k, v string) {
		if v != "" {
			rows = append(rows, kv{k, v})
		}
	}
	add("Model", m.Model)
	add("Target", report.RedactURL(m.TargetURL))
	add("API", m.APIOrChat())
	if m.Engine != "" {
		add("Engine", strings.TrimSpace(m.Engine+" "+m.EngineVersion))
	}
	if m.MaxModelLen > 0 {
		add("Max model length", grouped(float64(m.MaxModelLen), 0)+" tokens")
	}
	if m.GPU != nil {
		g := fmt.Sprintf("%d× %s", max(m.GPU.Count, 1), m.GPU.Name)
		if m.GPU.MemoryBytes > 0 {
			g += fmt.Sprintf(" (%.0f GiB each)", float64(m.GPU.MemoryBytes)/(1<<30))
		}
		add("GPU", g)
	}
	if !m.StartedAt.IsZero() {
		run := m.StartedAt.UTC().Format("2006-01-02 15:04 MST")
		if !m.FinishedAt.IsZero() {
			run += " · " + m.FinishedAt.Sub(m.StartedAt).Round(time.Second).String()
		}
		add("Run", run)
	}
	c := r.Config
	add("Step start", summarizeDrain(r).metaText())
	add("Closed loop N", joinInts(c.ClosedLoopLadder))
	add("Burst N", joinInts(c.BurstLadder))
	if c.StepDurationSeconds > 0 {
		add("Step", strconv.FormatFloat(c.StepDurationSeconds, 'f', -1, 64)+" s per closed-loop step")
	}
	h := m.Host
	if h.OS != "" {
		host := fmt.Sprintf("%s/%s, %d CPUs", h.OS, h.Arch, h.CPUs)
		if h.Hostname != "" {
			host = h.Hostname + " (" + host + ")"
		}
		add("Client host", host)
	}
	add("slaprobe", m.ToolVersion)
	return rows
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// burstNote is added to a headline tile read from a burst: a report with
// no closed-loop step has no sustained figure, and the tile must say so.
const burstNote = "from a burst (N sent at once): no closed-loop step ran, so not a sustained figure"

func headlineTiles(r *report.Report) []tile {
	h := r.Headline
	var out []tile
	extra := func(s *report.Figure, more string) string {
		if s.Mode == sweep.ModeBurst {
			return strings.TrimPrefix(more+"; "+burstNote, "; ")
		}
		return more
	}
	var bh report.Headline
	if b := baseReport(r); b != nil {
		bh = b.Headline
		if bh.Empty() {
			bh = report.ComputeHeadline(b)
		}
	}
	compared := func(t tile, base, cur *report.Figure, metric string, boundish bool) tile {
		if r.Comparison != nil {
			t.Change, t.ChangeClass = headlineChange(base, cur, r, metric, boundish)
		}
		return t
	}
	if s := h.PeakDecode; s != nil {
		out = append(out, compared(tile{Label: "Peak decode speed", Value: fmtRate(s.Value), Unit: "tok/s", Sub: where(s), Extra: extra(s, "")},
			bh.PeakDecode, s, report.MetricDecode, false))
	}
	if s := h.MaxSystemThroughput; s != nil {
		out = append(out, compared(tile{Label: "Max system throughput", Value: fmtRate(s.Value), Unit: "tok/s", Sub: where(s),
			Extra: extra(s, "≈ "+fmtBig(s.Value*3600)+" tokens per hour")}, bh.MaxSystemThroughput, s, report.MetricSystemThroughput, false))
	}
	if s := h.BestTTFT; s != nil {
		out = append(out, compared(tile{Label: "Best time to first token", Value: fmtSeconds(s.Value), Sub: where(s), Extra: extra(s, "")},
			bh.BestTTFT, s, report.MetricTTFT, false))
	}
	if len(h.MaxSafeQueue) > 0 {
		first := h.MaxSafeQueue[0]
		t := tile{Label: "Max safe queue", Value: fmtBound(statBound(&first)), Unit: "requests", Sub: first.Scenario}
		if len(r.Capacity.MaxSafeQueue) > 0 {
			q := r.Capacity.MaxSafeQueue[0]
			t.Sub += ", TTFT " + string(q.Stat) + " ≤ " + fmtSecondsShort(q.ThresholdSeconds)
		}
		var rest []string
		for _, s := range h.MaxSafeQueue[1:] {
			rest = append(rest, s.Scenario+" "+fmtBound(statBound(&s)))
		}
		t.Extra = strings.Join(rest, " · ")
		if c := r.Comparison.CapacityOf(report.CapacityMaxSafeQueue, first.Scenario); c != nil {
			t.Change = capacityChangeText(c)
			if c.Significant() {
				t.ChangeClass = c.Verdict
			}
		}
		out = append(out, t)
	}
	if len(h.GoodputCapacity) > 0 {
		first := h.GoodputCapacity[0]
		t := tile{Label: "Capacity on goodput", Value: fmtBound(statBound(&first)), Unit: "requests", Sub: first.Scenario}
		var rest []string
		for _, c := range r.Capacity.On {
			if c.Scenario == first.Scenario && strings.HasPrefix(c.Rule, "goodput") {
				t.Sub += ", " + ruleLabel(c.Rule)
				rest = append(rest, betweenText(c))
				if cc := r.Comparison.CapacityOnRule(report.CapacityOn, c.Scenario, c.Rule); cc != nil {
					t.Change = capacityChangeText(cc)
					if cc.Significant() {
						t.ChangeClass = cc.Verdict
					}
				}
				break
			}
		}
		for _, s := range h.GoodputCapacity[1:] {
			rest = append(rest, s.Scenario+" "+fmtBound(statBound(&s)))
		}
		t.Extra = strings.Join(rest, " · ")
		out = append(out, t)
	}
	if len(h.Conversations) > 0 {
		first := h.Conversations[0]
		t := tile{Label: "Concurrent conversations", Value: fmtBound(statBound(&first)), Unit: "conversations", Sub: first.Scenario}
		if len(r.Capacity.Conversations) > 0 {
			t.Sub += ", follow-ups ≥ " + fmtPct(r.Capacity.Conversations[0].HitShare) + " cache hits"
		}
		var rest []string
		for _, s := range h.Conversations[1:] {
			rest = append(rest, s.Scenario+" "+fmtBound(statBound(&s)))
		}
		t.Extra = strings.Join(rest, " · ")
		if c := r.Comparison.CapacityOf(report.CapacityConversations, first.Scenario); c != nil {
			t.Change = capacityChangeText(c)
			if c.Significant() {
				t.ChangeClass = c.Verdict
			}
		}
		out = append(out, t)
	}
	if h.RequestsSent > 0 {
		t := tile{Label: "Success rate", Value: fmtPct(h.SuccessRate),
			Sub: fmt.Sprintf("%s of %s requests", grouped(float64(h.RequestsOK), 0), grouped(float64(h.RequestsSent), 0))}
		if h.SuccessRate < 0.99 {
			t.Level = "poor"
		}
		if r.Comparison != nil && bh.RequestsSent > 0 {
			t.Change = "base " + fmtPct(bh.SuccessRate)
		}
		out = append(out, t)
	}
	if s := h.UsersAt32K; s != nil {
		t := tile{Label: "Concurrent users at 32K context", Value: fmtBound(statBound(s)), Unit: "requests", Sub: s.Scenario}
		if sc := r.ScenarioNamed(s.Scenario); sc != nil {
			t.Extra = strings.Join(thresholdTexts(sc.Thresholds), ", ")
		}
		if c := r.Comparison.CapacityOf(report.CapacityUseCase, s.Scenario); c != nil {
			t.Change = capacityChangeText(c)
			if c.Significant() {
				t.ChangeClass = c.Verdict
			}
		}
		out = append(out, t)
	}
	return out
}

func appendix(r *report.Report) []appendixEntry {
	var out []appendixEntry
	for _, s := range r.Scenarios {
		s := s
		e := appendixEntry{ID: "scenario-" + slugify(s.Name), Name: s.Name,
			Info: fmt.Sprintf("%s · %s in / %s out", s.Family, grouped(float64(s.InputTokens), 0), grouped(float64(s.OutputTokens), 0))}
		if th := thresholdTexts(s.Thresholds); len(th) > 0 {
			e.Info += " · " + strings.Join(th, ", ")
		}
		if s.Description != "" {
			e.Info += " · " + s.Description
		}
		for _, m := range s.Modes() {
			if len(m.Steps) > 0 {
				e.Tables = append(e.Tables, stepTables(r, &s, m.Mode)...)
			}
		}
		for _, st := range s.StoppedEarly {
			e.Notes = append(e.Notes, sentence(earlyStopText(st)))
		}
		for _, m := range s.Modes() {
			for _, st := range sortedSteps(m.Steps) {
				if st.StartedBusy() {
					e.Notes = append(e.Notes, busyStepNote(m.Mode, st))
				}
				if !st.Measured() {
					e.Notes = append(e.Notes, notMeasuredNote(m.Mode, st))
				}
			}
		}
		out = append(out, e)
	}
	// A comparison lists the scenarios only the baseline measured too.
	if b := baseReport(r); b != nil {
		for _, s := range b.Scenarios {
			s := s
			if scenarioMatching(r, &s) != nil {
				continue
			}
			e := appendixEntry{ID: "base-scenario-" + slugify(s.Name), Name: s.Name + " (only in the base run)",
				Info: fmt.Sprintf("%s · %s in / %s out · measured in the base run only; its values are the base’s", s.Family, grouped(float64(s.InputTokens), 0), grouped(float64(s.OutputTokens), 0))}
			for _, m := range s.Modes() {
				if len(m.Steps) > 0 {
					e.Tables = append(e.Tables, stepTables(&report.Report{}, &s, m.Mode)...)
				}
			}
			out = append(out, e)
		}
	}
	return out
}

// scenarioMatching returns r's scenario with s's name and lengths, or nil.
func scenarioMatching(r *report.Report, s *report.Scenario) *report.Scenario {
	for i := range r.Scenarios {
		o := &r.Scenarios[i]
		if o.Name == s.Name && o.InputTokens == s.InputTokens && o.OutputTokens == s.OutputTokens {
			return o
		}
	}
	return nil
}

func earlyStopText(e sweep.EarlyStop) string {
	msg := fmt.Sprintf("%s ladder stopped after N=%d", modeLabel(e.Mode), e.AfterN)
	if len(e.SkippedLadderN) > 0 {
		msg += " (skipped N=" + joinInts(e.SkippedLadderN) + ")"
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	return msg + "."
}

// sentence capitalises the first letter.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

const htmlTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<meta name="generator" content="slaprobe {{.ToolVersion}}">
<title>{{.Title}}</title>
<style>
:root{--ink:#1f2933;--muted:#52606d;--faint:#7b8794;--line:#e4e7eb;--panel:#f8fafc;--accent:#0b5394;
--ex:#1a9850;--gd:#91cf60;--ac:#fdae61;--pr:#d73027}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;color:var(--ink);background:#fff;font:15px/1.55 -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans","Liberation Sans",sans-serif;font-variant-numeric:tabular-nums}
main{max-width:1360px;margin:0 auto;padding:32px 36px 64px}
header.top{border-bottom:3px solid var(--accent);padding-bottom:18px;margin-bottom:22px}
.kicker{text-transform:uppercase;letter-spacing:.12em;font-size:12px;font-weight:700;color:var(--accent);margin:0 0 6px}
h1{font-size:30px;line-height:1.2;margin:0 0 4px;font-weight:700;overflow-wrap:anywhere}
.subtitle{color:var(--muted);margin:0 0 16px;font-size:16px}
dl.meta{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:4px 28px;margin:0;font-size:13.5px}
dl.meta div{display:flex;gap:10px;border-bottom:1px dotted var(--line);padding:3px 0}
dl.meta dt{color:var(--faint);min-width:118px;flex:none}
dl.meta dd{margin:0;overflow-wrap:anywhere}
nav.toc{margin:18px 0 6px;font-size:13.5px;display:flex;flex-wrap:wrap;gap:6px 18px}
nav.toc a{color:var(--accent);text-decoration:none}
nav.toc a:hover{text-decoration:underline}
.notes{background:#fff8e6;border:1px solid #f3d488;border-radius:8px;padding:10px 14px;margin:16px 0;font-size:14px}
.notes p{margin:2px 0}
h2{font-size:22px;margin:44px 0 4px;padding-top:8px;border-top:1px solid var(--line)}
.intro{color:var(--muted);max-width:920px;margin:0 0 16px}
.tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:14px;margin:8px 0}
.tile{background:var(--panel);border:1px solid var(--line);border-left:4px solid var(--accent);border-radius:8px;padding:12px 14px}
.tile.poor{border-left-color:var(--pr)}
.tile .label{font-size:12px;text-transform:uppercase;letter-spacing:.06em;color:var(--muted);font-weight:600}
.tile .value{font-size:27px;font-weight:700;line-height:1.25;margin:4px 0 2px;overflow-wrap:anywhere}
.tile .sub{font-size:13px;color:var(--ink);overflow-wrap:anywhere}
.tile .extra{font-size:12.5px;color:var(--faint);margin-top:2px;overflow-wrap:anywhere}
.headline .tile .value{font-size:30px}
.tile .change{font-size:12.5px;margin-top:4px;color:var(--muted);font-weight:600}
.tile .change.worse{color:#b2182b}
.tile .change.better{color:#1a7f45}
section.comparison{border:1px solid var(--line);border-radius:10px;padding:4px 18px 12px;margin:16px 0}
section.comparison h2{border-top:none;margin-top:10px}
.verdicts h3{font-size:15px;margin:12px 0 2px}
.verdicts h3.worse{color:#b2182b}
.verdicts h3.better{color:#1a7f45}
.verdicts ul{margin:2px 0 6px;padding-left:22px;font-size:13.5px}
.verdicts .counts{color:var(--muted);font-size:13px}
tbody tr.base-only{color:var(--faint);font-style:italic}
.tile .unit{font-size:15px;font-weight:600;color:var(--muted)}
.tiles.compact{grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:10px;margin:6px 0 10px}
.tiles.compact .tile{padding:8px 12px}
.tiles.compact .value{font-size:21px}
.tiles.pair{grid-template-columns:repeat(2,minmax(0,1fr))}
.figs{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:22px}
figure.chart{margin:0;background:#fff;border:1px solid var(--line);border-radius:10px;padding:16px 18px 12px;break-inside:avoid;page-break-inside:avoid;min-width:0}
figure.wide{grid-column:1/-1}
figure.split{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:0 40px;align-items:start}
figure.split .textcol{order:2;padding-top:4px}
figure.split .plotcol{order:1}
th.gs,td.gs{border-left:1px solid #e4e7eb}
thead tr.groups th.gs:first-child{border-left:none}
figure h3{font-size:16.5px;margin:0 0 4px}
figure .how{font-size:13px;color:var(--muted);margin:0 0 8px}
figure .how b{color:var(--ink);font-weight:600}
ul.legend{list-style:none;margin:4px 0 2px;padding:0;display:flex;flex-wrap:wrap;gap:4px 16px;font-size:12.5px;color:var(--ink)}
ul.legend li{display:flex;align-items:center;gap:6px;overflow-wrap:anywhere}
ul.legend svg{flex:none}
svg.plot{width:100%;height:auto;display:block;overflow:visible}
svg.plot text{font-family:inherit}
.tick{font-size:11px;fill:#52606d}
.axis-label{font-size:12px;fill:#323f4b;font-weight:600}
.axes line{stroke:#9aa5b1;stroke-width:1}
.gridlines line{stroke:#e4e7eb;stroke-width:1}
.gridlines line.v{stroke:#eef1f4}
.band-excellent{fill:var(--ex);fill-opacity:.09}
.band-good{fill:var(--gd);fill-opacity:.13}
.band-acceptable{fill:var(--ac);fill-opacity:.14}
.band-poor{fill:var(--pr);fill-opacity:.08}
.band-label{font-size:10px;font-weight:600;letter-spacing:.05em;text-transform:uppercase;opacity:.75}
.band-label-excellent{fill:#1a7f45}.band-label-good{fill:#4d7f1e}.band-label-acceptable{fill:#a65300}.band-label-poor{fill:#b2182b}
.line{fill:none;stroke-width:2.2;stroke-linejoin:round;stroke-linecap:round}
.line.dashed{stroke-dasharray:7 4;stroke-width:1.8}
.line.edge{stroke-width:1.4}
.series.faint{opacity:.5}
.series.faint .line{stroke-width:1.6}
ul.legend li.faint svg{opacity:.5}
.mk{stroke-width:1.6}
.pt:hover .mk{stroke-width:3.5}
.area{fill-opacity:.2;stroke:none}
.ref{stroke-width:1.6;stroke-dasharray:7 5;fill:none}
.ref-label{font-size:11.5px;font-weight:700;paint-order:stroke;stroke:#fff;stroke-width:3.5px;stroke-linejoin:round}
.empty{font-size:13px;fill:var(--faint)}
.findings{margin:8px 0 0;padding:8px 0 0;border-top:1px dashed var(--line);font-size:13.5px}
.findings p{margin:2px 0}
.placeholder{display:flex;align-items:center;justify-content:center;min-height:180px;margin:8px 0;border:2px dashed #cbd2d9;border-radius:8px;background:repeating-linear-gradient(135deg,#fafbfc 0 12px,#f3f5f7 12px 24px);color:var(--muted);text-align:center;padding:18px;font-size:14px}
.placeholder strong{display:block;color:var(--ink);font-size:15px;margin-bottom:4px}
.table-wrap{overflow-x:auto;margin:8px 0}
table{border-collapse:collapse;font-size:12.5px;width:100%}
th,td{padding:4px 7px;border-bottom:1px solid var(--line);text-align:left;white-space:nowrap}
th{background:var(--panel);font-weight:600;color:var(--ink);vertical-align:bottom}
thead tr.groups th{text-align:center;border-bottom:1px solid #cbd2d9;font-size:11.5px;text-transform:uppercase;letter-spacing:.04em;color:var(--muted)}
td.num,th.num{text-align:right}
table.steps{width:auto;min-width:50%}
table.steps td,table.steps th{min-width:52px}
table.steps th{white-space:normal;max-width:84px}
tbody tr:nth-child(even){background:#fbfcfd}
tbody tr.busy{background:#fff4e0}
tbody tr.busy td:first-child{font-weight:700;color:#b03a2e}
table.cap td:nth-child(4){font-weight:700;font-size:14px}
caption{caption-side:top;text-align:left;font-weight:600;padding:6px 0;font-size:13.5px}
.bands td.lv{width:22%}
.bands th.lv{width:22%}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:6px;vertical-align:-1px;border:1px solid rgba(0,0,0,.15)}
.sw.excellent{background:rgba(26,152,80,.35)}.sw.good{background:rgba(145,207,96,.5)}.sw.acceptable{background:rgba(253,174,97,.55)}.sw.poor{background:rgba(215,48,39,.35)}
section.scenario{margin-top:26px}
section.scenario h3{font-size:17px;margin:0}
section.scenario .info{color:var(--muted);font-size:13px;margin:2px 0 6px}
dl.method{display:grid;grid-template-columns:170px 1fr;gap:4px 16px;font-size:13.5px}
dl.method dt{font-weight:600}
dl.method dd{margin:0;color:var(--muted)}
footer{margin-top:48px;padding-top:12px;border-top:1px solid var(--line);color:var(--faint);font-size:12.5px}
@media (max-width:1000px){.figs{grid-template-columns:1fr}main{padding:20px 16px}}
@media print{
 body{font-size:11pt}
 main{max-width:none;padding:0}
 nav.toc{display:none}
 h2{break-before:page;border-top:none}
 section:first-of-type h2{break-before:auto}
 figure.chart{border-color:#ccc}
 .table-wrap{overflow:visible}
 table{font-size:8pt}
 a{color:inherit;text-decoration:none}
}
</style>
</head>
<body>
<main>
<header class="top">
<p class="kicker">{{.Kicker}}</p>
<h1>{{.Title}}</h1>
{{if .Subtitle}}<p class="subtitle">{{.Subtitle}}</p>{{end}}
<dl class="meta">{{range .Meta}}<div><dt>{{.K}}</dt><dd>{{.V}}</dd></div>{{end}}</dl>
<nav class="toc" aria-label="Contents">{{if .Compare}}<a href="#chart-comparison">What changed</a>{{end}}<a href="#chart-headline">Headline</a>{{range .Sections}}<a href="#{{.ID}}">{{.Title}}</a>{{end}}{{if .Appendix}}<a href="#data">All measurements</a>{{end}}<a href="#method">Method</a></nav>
</header>
{{if .Notes}}<div class="notes" role="note">{{range .Notes}}<p>{{.}}</p>{{end}}</div>{{end}}
{{with .Compare}}
<section id="chart-comparison" class="comparison" data-chart="comparison" aria-label="What changed">
<h2>What changed since {{.BaseLabel}}?</h2>
<dl class="meta">{{range .Base}}<div><dt>{{.K}}</dt><dd>{{.V}}</dd></div>{{end}}</dl>
{{if .Differences}}<div class="notes" role="note"><p><strong>The two runs differ:</strong></p>{{range .Differences}}<p>{{.}}</p>{{end}}</div>{{end}}
<div class="verdicts">
<h3 class="worse">Significant regressions</h3>
{{if .Regressions}}<ul class="worse">{{range .Regressions}}<li>{{.}}</li>{{end}}</ul>{{else}}<p>None: nothing got significantly worse.</p>{{end}}
<h3 class="better">Significant improvements</h3>
{{if .Improvements}}<ul class="better">{{range .Improvements}}<li>{{.}}</li>{{end}}</ul>{{else}}<p>None.</p>{{end}}
<p class="counts">{{.Counts}} The base run is drawn in every chart in the same colour, dashed and faint, named “(base)”; every table has its change columns. The method section says what “significant” means here.</p>
</div>
</section>
{{end}}

<section id="chart-headline" class="headline" data-chart="headline" aria-label="Headline figures">
<div class="tiles">{{range .Headline}}<div class="tile{{if .Level}} {{.Level}}{{end}}"><div class="label">{{.Label}}</div><div class="value">{{.Value}}{{if .Unit}} <span class="unit">{{.Unit}}</span>{{end}}</div>{{if .Sub}}<div class="sub">{{.Sub}}</div>{{end}}{{if .Extra}}<div class="extra">{{.Extra}}</div>{{end}}{{if .Change}}<div class="change{{if .ChangeClass}} {{.ChangeClass}}{{end}}">{{.Change}}</div>{{end}}</div>{{else}}<p>No step completed a request: there is no figure to give (the notes under each scenario say why).</p>{{end}}</div>
</section>

{{if .Bands}}<section id="how-to-read" aria-label="Experience bands">
<div class="table-wrap"><table class="bands">
<caption>Experience bands: the faint colours behind the charts</caption>
<thead><tr><th>metric</th><th class="lv"><span class="sw excellent"></span>excellent</th><th class="lv"><span class="sw good"></span>good</th><th class="lv"><span class="sw acceptable"></span>acceptable</th><th class="lv"><span class="sw poor"></span>poor</th></tr></thead>
<tbody>{{range .Bands}}<tr><td>{{.Metric}}</td>{{range .Cells}}<td class="lv">{{.}}</td>{{end}}</tr>{{end}}</tbody>
</table></div>
</section>{{end}}

{{range .Sections}}
<section id="{{.ID}}">
<h2>{{.Title}}</h2>
<p class="intro">{{.Intro}}</p>
<div class="figs">
{{range .Figures}}{{template "figure" .}}{{end}}
</div>
</section>
{{end}}

{{if .Appendix}}<section id="data">
<h2>All measurements</h2>
<p class="intro">Every step as measured. Times in seconds unless the column says ms; decode and prefill per user; percentiles over the requests of the step.</p>
{{range .Appendix}}
<section class="scenario" id="{{.ID}}">
<h3>{{.Name}}</h3>
<p class="info">{{.Info}}</p>
{{range .Notes}}<p class="info">{{.}}</p>{{end}}
{{range .Tables}}{{template "table" .}}{{end}}
</section>
{{end}}
</section>{{end}}

<section id="method">
<h2>Method</h2>
<dl class="method">{{range .Methodology}}<dt>{{.K}}</dt><dd>{{.V}}</dd>{{end}}</dl>
</section>

<footer>Generated by slaprobe {{.ToolVersion}} · schema {{.SchemaVersion}} · finished {{.Generated}}. The same numbers are in report.json.</footer>
</main>
</body>
</html>
{{define "figure"}}<figure class="chart{{if .Wide}} wide{{end}}{{if .Split}} split{{end}}" id="{{.DOMID}}" data-chart="{{.Chart}}"{{if .Scenario}} data-scenario="{{.Scenario}}"{{end}}{{if .Placeholder}} data-state="not-measured"{{end}}>
<div class="textcol">
<h3>{{.Title}}</h3>
<p class="how"><b>How to read:</b> {{.How}}</p>
{{if .Tiles}}<div class="tiles {{.TileClass}}">{{range .Tiles}}<div class="tile{{if .Level}} {{.Level}}{{end}}"><div class="label">{{.Label}}</div><div class="value">{{.Value}}{{if .Unit}} <span class="unit">{{.Unit}}</span>{{end}}</div>{{if .Sub}}<div class="sub">{{.Sub}}</div>{{end}}{{if .Extra}}<div class="extra">{{.Extra}}</div>{{end}}{{if .Change}}<div class="change{{if .ChangeClass}} {{.ChangeClass}}{{end}}">{{.Change}}</div>{{end}}</div>{{end}}</div>{{end}}
{{if .Split}}{{template "findings" .}}{{end}}
</div>
<div class="plotcol">
{{if .Placeholder}}<div class="placeholder"><div><strong>Not measured</strong>{{.Placeholder}}</div></div>{{else}}{{.Legend}}{{.SVG}}{{end}}
{{if .Table}}{{template "table" .Table}}{{end}}
{{if not .Split}}{{template "findings" .}}{{end}}
</div>
</figure>
{{end}}
{{define "findings"}}{{if .Findings}}<div class="findings">{{range .Findings}}<p>{{.}}</p>{{end}}</div>{{end}}{{end}}
{{define "table"}}{{$t := .}}<div class="table-wrap"><table{{if .Class}} class="{{.Class}}"{{end}}>{{if .Caption}}<caption>{{.Caption}}</caption>{{end}}
<thead>{{if .Groups}}<tr class="groups">{{range .Groups}}<th colspan="{{.Span}}" class="gs">{{.Label}}</th>{{end}}</tr>{{end}}<tr>{{range $i, $h := .Head}}<th class="{{align $t $i}}">{{$h}}</th>{{end}}</tr></thead>
<tbody>{{range $r, $row := .Rows}}<tr{{with rowClass $t $r}} class="{{.}}"{{end}}>{{range $i, $c := $row}}<td class="{{align $t $i}}">{{$c}}</td>{{end}}</tr>{{end}}</tbody>
</table></div>{{end}}
`
