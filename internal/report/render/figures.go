package render

// This file holds the report's line charts as data: for each, which step
// value it plots, against which axis, with which bands and reference lines,
// and what it finds. byN.figure and byContext.figure build them all.

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/slaprobe/slaprobe/internal/report"
	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/internal/svgchart"
	"github.com/slaprobe/slaprobe/internal/sweep"
)

// byN is a chart of one step value per scenario against N: the closed
// loop's concurrency, or the number of requests a burst sends at once.
type byN struct {
	chart, title, how string
	mode              sweep.Mode
	y                 svgchart.Axis // label, tick format, from zero
	bands             []svgchart.Band
	value             func(report.Step) (float64, bool) // false: not measured at this step
	tip               func(float64) string              // a point's value in its tooltip
	// Optional.
	refs     []svgchart.RefLine
	logY     bool                         // a log y axis when the values span more than 40×
	top      func(vals []float64) float64 // a fixed y axis from 0 to top
	findings func(r *report.Report, idx []int, ss []svgchart.Series, ns []float64) []string
}

// byNCharts are the charts against N, by chart name, for thresholds th.
func byNCharts(th report.ReferenceLines) map[string]byN {
	stat := th.MaxSafeQueueStat
	decode := func(s report.Step) (float64, bool) { return s.Decode.Mean, s.Decode.Mean > 0 }
	decodeTip := func(v float64) string { return fmtRate(v) + " tok/s" }
	decodeAxis := svgchart.Axis{Label: "decode speed per user (tok/s)", FromZero: true, Fmt: svgchart.TickRate}
	itl := func(s report.Step) (float64, bool) { return s.ITL.Mean * 1000, s.ITL.Mean > 0 }
	itlTip := func(v float64) string { return fmtMS(v/1000) + " ITL" }
	itlAxis := svgchart.Axis{Label: "inter-token latency (ms)", FromZero: true, Fmt: svgchart.TickPlain}
	var itlInstant, itlCeiling, ttftLimit []svgchart.RefLine
	if th.ITLInstantSeconds > 0 {
		itlInstant = []svgchart.RefLine{{Value: th.ITLInstantSeconds * 1000, Label: fmtSecondsShort(th.ITLInstantSeconds) + " instant", Color: colorITLInstant}}
	}
	if th.ITLCeilingSeconds > 0 {
		itlCeiling = []svgchart.RefLine{{Value: th.ITLCeilingSeconds * 1000, Label: fmtSecondsShort(th.ITLCeilingSeconds) + " MoE ceiling", Color: colorITLCeiling}}
	}
	if th.MaxSafeQueueTTFTSeconds > 0 {
		ttftLimit = []svgchart.RefLine{{Value: th.MaxSafeQueueTTFTSeconds, Label: fmtSecondsShort(th.MaxSafeQueueTTFTSeconds) + " TTFT limit", Color: colorTTFTLine}}
	}
	charts := []byN{
		{chart: slo.ChartDecodeVsConcurrency, title: "Per-user decode speed vs concurrency",
			how:  "Each line is one scenario. Higher is better: this is how fast text streams into one user’s screen while N users share the server. Above 50 tok/s text appears almost at once; below 15 tok/s it is slower than reading.",
			mode: sweep.ModeClosedLoop, y: decodeAxis, bands: bandsDecode, value: decode, tip: decodeTip,
			findings: decodeSpan("Per-user decode speed runs from %s tok/s (%s, N=%d) down to %s tok/s (%s, N=%d).")},
		{chart: slo.ChartITLVsConcurrency, title: "Inter-token latency vs concurrency",
			how:  "The gap between two streamed tokens, averaged per request. Lower is smoother. Under the dashed line streaming feels instant; between 20 and 70 ms it is noticeably slower but fine to read.",
			mode: sweep.ModeClosedLoop, y: itlAxis, bands: bandsITLms, value: itl, tip: itlTip, refs: itlInstant,
			findings: func(_ *report.Report, _ []int, ss []svgchart.Series, _ []float64) []string {
				return itlUnderInstant(ss, th)
			}},
		{chart: slo.ChartScalingEfficiency, title: "Scaling efficiency vs concurrency",
			how:  "System throughput divided by (single-user throughput × N). 100% means adding a user costs the others nothing; the drop shows how the GPU’s memory bandwidth is shared. Above 90% is excellent, below 50% means heavy contention.",
			mode: sweep.ModeClosedLoop, y: svgchart.Axis{Label: "scaling efficiency (%)", Fmt: svgchart.TickPlain}, bands: bandsEffPct,
			value: func(s report.Step) (float64, bool) {
				if s.ScalingEfficiency == nil {
					return 0, false
				}
				return *s.ScalingEfficiency * 100, true
			},
			tip: func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + "% efficiency" },
			top: func(vals []float64) float64 {
				ymax := 100.0
				for _, v := range vals {
					ymax = math.Max(ymax, v)
				}
				return math.Ceil(ymax/10) * 10
			},
			findings: func(_ *report.Report, _ []int, ss []svgchart.Series, ns []float64) []string {
				return scalingAtMaxN(ss, ns)
			}},
		{chart: slo.ChartTTFTVsQueueDepth, title: "TTFT vs queue depth",
			how:  "The chart to plan production with. N requests arrive together; the later ones wait for earlier prefills, so TTFT climbs with N. Where a line crosses the dashed limit, users start to find the service slow. The value plotted is TTFT " + string(stat) + ".",
			mode: sweep.ModeBurst, y: svgchart.Axis{Label: "time to first token (" + string(stat) + ")", FromZero: true, Fmt: svgchart.TickSeconds}, bands: bandsTTFT,
			value: func(s report.Step) (float64, bool) { v := s.TTFT.Stat(stat); return v, v > 0 }, tip: fmtSeconds, refs: ttftLimit, logY: true,
			findings: burstTTFT},
		{chart: slo.ChartITLVsQueueDepth, title: "Inter-token latency vs queue depth",
			how:  "Streaming smoothness under a burst. Continuous batching shares decode across all running requests, so ITL often levels off while TTFT keeps rising. The dashed line is the memory-bandwidth ceiling typical of large MoE models.",
			mode: sweep.ModeBurst, y: itlAxis, bands: bandsITLms, value: itl, tip: itlTip, refs: itlCeiling,
			findings: func(_ *report.Report, _ []int, ss []svgchart.Series, _ []float64) []string {
				return itlUnderCeiling(ss, th)
			}},
		{chart: slo.ChartDecodeVsQueueDepth, title: "Per-user decode speed vs queue depth",
			how:  "Decode speed of the requests of a burst, once they stream. It usually holds up far better than TTFT: a queued user waits longer to start, then reads at a similar pace.",
			mode: sweep.ModeBurst, y: decodeAxis, bands: bandsDecode, value: decode, tip: decodeTip,
			findings: decodeSpan("Under burst load per-user decode runs from %s tok/s (%s, N=%d) down to %s tok/s (%s, N=%d).")},
	}
	out := make(map[string]byN, len(charts))
	for _, c := range charts {
		out[c.chart] = c
	}
	return out
}

// nLabel names the x axis of a mode's charts.
func nLabel(m sweep.Mode) string {
	if m == sweep.ModeBurst {
		return "requests sent at once (queue depth)"
	}
	return "concurrent requests (N)"
}

// figure draws b for the scenarios idx at the N values ns.
func (b byN) figure(r *report.Report, idx []int, ns []float64) figure {
	f := newFigure(b.chart, b.title, b.how)
	ss, vals := metricSeries(r, idx, b.mode, b.value, b.tip)
	for _, ref := range b.refs {
		vals = append(vals, ref.Value) // a threshold stays on the axis
	}
	y := b.y
	if b.logY {
		y.Log = autoLog(vals)
	}
	if b.top != nil {
		y.Min, y.Max = 0, b.top(vals)
	}
	c := svgchart.Chart{ID: f.DOMID, Title: f.Title, X: nAxis(nLabel(b.mode), ns), Y: y, Series: ss, Refs: b.refs, Bands: b.bands}
	draw(&c, &f)
	if b.findings != nil {
		f.Findings = b.findings(r, idx, ss, ns)
	}
	return f
}

// decodeSpan finds the fastest and the slowest decode, in format's words.
func decodeSpan(format string) func(*report.Report, []int, []svgchart.Series, []float64) []string {
	return func(_ *report.Report, _ []int, ss []svgchart.Series, _ []float64) []string {
		hi, lo := extreme(ss, true), extreme(ss, false)
		if !hi.ok {
			return nil
		}
		return []string{fmt.Sprintf(format, fmtRate(hi.v), hi.scenario, hi.n, fmtRate(lo.v), lo.scenario, lo.n)}
	}
}

// itlUnderInstant: the best and worst ITL, and how many points stay under
// the instant line.
func itlUnderInstant(ss []svgchart.Series, th report.ReferenceLines) []string {
	lo, hi := extreme(ss, false), extreme(ss, true)
	if !lo.ok {
		return nil
	}
	msg := fmt.Sprintf("Best ITL %s (%s, N=%d); worst %s (%s, N=%d).", fmtMS(lo.v/1000), lo.scenario, lo.n, fmtMS(hi.v/1000), hi.scenario, hi.n)
	if th.ITLInstantSeconds > 0 {
		under, total := 0, 0
		for _, s := range ss {
			if s.Faint {
				continue // a comparison's baseline
			}
			for _, p := range s.Points {
				total++
				if p.Y <= th.ITLInstantSeconds*1000 {
					under++
				}
			}
		}
		msg += fmt.Sprintf(" %d of %d measured points stay under %s.", under, total, fmtSecondsShort(th.ITLInstantSeconds))
	}
	return []string{msg}
}

// scalingAtMaxN: scaling efficiency at the largest N every scenario reached.
func scalingAtMaxN(ss []svgchart.Series, ns []float64) []string {
	if len(ss) == 0 {
		return nil
	}
	type at struct {
		name string
		v    float64
	}
	maxN := 0.0
	for _, n := range ns {
		maxN = n
	}
	var row []at
	for _, s := range ss {
		if s.Faint {
			continue // a comparison's baseline
		}
		for _, p := range s.Points {
			if p.X == maxN {
				row = append(row, at{s.Name, p.Y})
			}
		}
	}
	if len(row) == 0 {
		return nil
	}
	sort.SliceStable(row, func(i, j int) bool { return row[i].v > row[j].v })
	if len(row) == 1 {
		return []string{fmt.Sprintf("At N=%d scaling efficiency is %.0f%% (%s).", int(maxN), row[0].v, row[0].name)}
	}
	return []string{fmt.Sprintf("At N=%d scaling efficiency ranges from %.0f%% (%s) to %.0f%% (%s).",
		int(maxN), row[0].v, row[0].name, row[len(row)-1].v, row[len(row)-1].name)}
}

// burstTTFT: the TTFT span under burst load, and the scenarios whose burst
// ladder stopped early.
func burstTTFT(r *report.Report, idx []int, ss []svgchart.Series, _ []float64) []string {
	var out []string
	if lo, hi := extreme(ss, false), extreme(ss, true); lo.ok {
		out = append(out, fmt.Sprintf("TTFT under burst load runs from %s (%s, N=%d) to %s (%s, N=%d).",
			fmtSeconds(lo.v), lo.scenario, lo.n, fmtSeconds(hi.v), hi.scenario, hi.n))
	}
	for _, i := range idx {
		for _, e := range r.Scenarios[i].StoppedEarly {
			if e.Mode == sweep.ModeBurst {
				out = append(out, r.Scenarios[i].Name+": "+earlyStopText(e))
			}
		}
	}
	return out
}

// itlUnderCeiling: the highest ITL under burst, and whether it crosses the
// ceiling.
func itlUnderCeiling(ss []svgchart.Series, th report.ReferenceLines) []string {
	hi := extreme(ss, true)
	if !hi.ok {
		return nil
	}
	msg := fmt.Sprintf("Highest ITL under burst: %s (%s, N=%d).", fmtMS(hi.v/1000), hi.scenario, hi.n)
	if th.ITLCeilingSeconds > 0 {
		if hi.v <= th.ITLCeilingSeconds*1000 {
			msg += " Every point stays under the " + fmtSecondsShort(th.ITLCeilingSeconds) + " ceiling."
		} else {
			msg += " Some points cross the " + fmtSecondsShort(th.ITLCeilingSeconds) + " ceiling."
		}
	}
	return []string{msg}
}

// byContext is a chart of one step value against the context length, one
// line per closed-loop N, with a comparison's baseline beside each line.
type byContext struct {
	chart, title, how string
	y                 svgchart.Axis
	value             func(report.Step) (float64, bool)
	tip               func(float64) string
	empty             string // the placeholder when nothing was measured
}

// The charts against the context length.
var (
	queueWaitByContext = byContext{chart: slo.ChartQueueWait, title: "Queue wait vs context and concurrency",
		how: "Time a request waited inside the engine before its prefill began, from the engine’s own queue-time histogram. Near zero means the GPU took every request at once; growth means requests wait for a batch slot or KV cache.",
		y:   svgchart.Axis{Label: "queue wait", FromZero: true, Fmt: svgchart.TickSeconds},
		value: func(s report.Step) (float64, bool) {
			if s.QueueWaitSeconds == nil {
				return 0, false
			}
			return *s.QueueWaitSeconds, true
		},
		tip:   fmtSeconds,
		empty: "Queue wait was not measured: the engine exposes no vllm:request_queue_time_seconds histogram, or no closed-loop sweep ran."}
	prefillByContext = byContext{chart: slo.ChartPrefillVsContext, title: "Per-user prefill speed vs context",
		how:   "Prompt tokens processed per second for one request, TTFT minus queue wait. It usually rises with context while the GPU fills up, peaks, then falls as attention cost grows or chunked prefill caps each step.",
		y:     svgchart.Axis{Label: "prefill speed per user (tok/s)", FromZero: true, Fmt: svgchart.TickRate},
		value: func(s report.Step) (float64, bool) { return s.PrefillTokensPerSecond, s.PrefillTokensPerSecond > 0 },
		tip:   func(v float64) string { return fmtRate(v) + " tok/s" },
		empty: "Prefill speed was not measured."}
	powerByContext = byContext{chart: slo.ChartPower, title: "GPU power vs context and concurrency",
		how: "Average GPU draw during each closed-loop step, summed over the target’s GPUs. Budget cooling and power for the peak, and cost for the average.",
		y:   svgchart.Axis{Label: "average GPU power (W)", FromZero: true, Fmt: svgchart.TickPlain},
		value: func(s report.Step) (float64, bool) {
			if s.Power == nil {
				return 0, false
			}
			return s.Power.AvgWatts, true
		},
		tip:   fmtWatts,
		empty: "No closed-loop step carried power readings, so the chart is empty."}
)

// series is b's lines for the scenarios idx, a baseline's with them, and
// the context lengths they span.
func (b byContext) series(r *report.Report, idx []int) ([]svgchart.Series, []float64) {
	ss, ctxs := contextSeries(contextRows(r, idx), b.value, b.tip)
	if len(ss) == 0 {
		return nil, ctxs
	}
	return withBaseContext(r, idx, ss, ctxs, b.value, b.tip)
}

// draw puts ss on f's chart, or b's placeholder when there is none.
func (b byContext) draw(f *figure, ss []svgchart.Series, ctxs []float64) {
	if len(ss) == 0 {
		f.Placeholder = b.empty
		return
	}
	c := svgchart.Chart{ID: f.DOMID, Title: f.Title, X: ctxAxis(ctxs), Y: b.y, Series: ss}
	draw(&c, f)
}

// figure draws b for the scenarios idx.
func (b byContext) figure(r *report.Report, idx []int) (figure, []svgchart.Series) {
	f := newFigure(b.chart, b.title, b.how)
	ss, ctxs := b.series(r, idx)
	b.draw(&f, ss, ctxs)
	return f, ss
}
