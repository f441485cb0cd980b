package status

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"time"

	"github.com/slaprobe/slaprobe/internal/svgchart"
	"github.com/slaprobe/slaprobe/internal/sweep"
	"github.com/slaprobe/slaprobe/prober"
)

// metric is one of the four numbers a probe is judged by.
type metric struct {
	Name  string // TTFT, ITL, decode, E2E
	Unit  string // "s" or "tok/s"
	Lower bool   // lower is better
	// tail is the quantile of the slow tail the SLA is judged on, as the
	// alert rules judge it: p95 of latencies, p10 of decode speed.
	tail  float64
	value func(p *Probe) (float64, bool)
	limit func(t prober.Thresholds) float64 // 0: no threshold
}

var metrics = []metric{
	{Name: "TTFT", Unit: "s", Lower: true, tail: 0.95,
		value: func(p *Probe) (float64, bool) { return p.TTFT.Seconds(), p.Timed() && !p.CacheHit && p.TTFT > 0 },
		limit: func(t prober.Thresholds) float64 { return t.TTFT.Seconds() }},
	{Name: "ITL", Unit: "s", Lower: true, tail: 0.95,
		value: func(p *Probe) (float64, bool) { return p.ITL.Seconds(), p.Timed() && p.ITL > 0 },
		limit: func(t prober.Thresholds) float64 { return t.ITL.Seconds() }},
	{Name: "Decode", Unit: "tok/s", Lower: false, tail: 0.10,
		value: func(p *Probe) (float64, bool) { return p.Decode, p.Timed() && p.Decode > 0 },
		limit: func(t prober.Thresholds) float64 { return t.MinDecode }},
	{Name: "E2E", Unit: "s", Lower: true, tail: 0.95,
		value: func(p *Probe) (float64, bool) { return p.E2E.Seconds(), p.Timed() && !p.CacheHit && p.E2E > 0 },
		limit: func(t prober.Thresholds) float64 { return t.E2E.Seconds() }},
}

// acceptance is the speculative-decoding acceptance of the probes, shown
// beside decode speed on a scenario whose probes reported it (vLLM's
// per-request metrics, llama.cpp's timings): the share of drafted tokens the
// model kept explains a decode speed that moves. No SLA; p10 is its tail.
var acceptance = metric{Name: "Acceptance", Unit: "ratio", Lower: false, tail: 0.10,
	value: func(p *Probe) (float64, bool) { return p.Acceptance, p.Timed() && p.HasAcceptance },
	limit: func(prober.Thresholds) float64 { return 0 }}

// withAcceptance is the metrics of a scenario's card: acceptance follows
// decode speed when any of the probes reported it.
func withAcceptance(probes []Probe) []metric {
	for i := range probes {
		if probes[i].HasAcceptance {
			out := make([]metric, 0, len(metrics)+1)
			for _, m := range metrics {
				out = append(out, m)
				if m.Name == "Decode" {
					out = append(out, acceptance)
				}
			}
			return out
		}
	}
	return metrics
}

// metricRow is one metric of one scenario on the status page.
type metricRow struct {
	Name, Unit string
	Last       string // the last successful probe's value
	P50, Tail  string
	TailLabel  string        // "p95" or "p10"
	Limit      string        // the threshold, "" when none
	LimitOp    string        // "≤" or "≥"
	N          int           // values in the window
	Verdict    string        // "ok", "breach" or "" (no threshold or no data)
	Spark      template.HTML // the recent probes' values: a sparkline as wide as its cell
}

// buildRow computes one metric over the probes in the window (for p50 and
// the tail) and over every kept probe (for the chart).
func buildRow(m metric, probes []Probe, since time.Time, th prober.Thresholds) metricRow {
	row := metricRow{Name: m.Name, Unit: m.Unit, TailLabel: fmt.Sprintf("p%d", int(math.Round(m.tail*100))), LimitOp: "≤"}
	if !m.Lower {
		row.LimitOp = "≥"
	}
	limit := m.limit(th)
	if limit > 0 {
		row.Limit = formatValue(limit, m.Unit)
	}
	var window []float64
	var chart []svgchart.SparkPoint
	for i := range probes {
		p := &probes[i]
		v, ok := m.value(p)
		if !p.Done {
			continue
		}
		if i >= len(probes)-sparkMax {
			chart = append(chart, svgchart.SparkPoint{V: v, OK: ok, Failed: !p.Timed()}) // a short answer without this metric is a gap, not a failure
		}
		if !ok {
			continue
		}
		row.Last = formatValue(v, m.Unit)
		if !p.Sent.Before(since) {
			window = append(window, v)
		}
	}
	row.N = len(window)
	if len(window) > 0 {
		sort.Float64s(window)
		p50, tail := sweep.Quantile(window, 0.5), sweep.Quantile(window, m.tail)
		row.P50, row.Tail = formatValue(p50, m.Unit), formatValue(tail, m.Unit)
		if limit > 0 {
			row.Verdict = "ok"
			if (m.Lower && tail > limit) || (!m.Lower && tail < limit) {
				row.Verdict = "breach"
			}
		}
	}
	spark := svgchart.Sparkline{Title: fmt.Sprintf("%s of the last %d probes", m.Name, len(chart)), Points: chart,
		Limit: limit, Lower: m.Lower, Empty: "no probe yet"}
	row.Spark = spark.SVG()
	return row
}

// formatValue prints seconds as ms below one second, tokens/s with one
// decimal.
func formatValue(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case unit == "tok/s":
		return fmt.Sprintf("%.1f tok/s", v)
	case unit == "ratio":
		return fmt.Sprintf("%.0f %%", v*100)
	case v < 1:
		return fmt.Sprintf("%.1f ms", v*1000)
	default:
		return fmt.Sprintf("%.2f s", v)
	}
}

// sparkMax is how many of the latest probes a sparkline draws: more would
// crowd a phone's width.
const sparkMax = 60
