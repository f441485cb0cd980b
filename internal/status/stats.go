package status

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
	"time"

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

// metricRow is one metric of one scenario on the status page.
type metricRow struct {
	Name, Unit   string
	Last         string // the last successful probe's value
	P50, Tail    string
	TailLabel    string // "p95" or "p10"
	Limit        string // the threshold, "" when none
	LimitOp      string // "≤" or "≥"
	N            int    // values in the window
	Verdict      string // "ok", "breach" or "" (no threshold or no data)
	Spark        template.HTML
	SparkCaption string
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
	var chart []sparkPoint
	for i := range probes {
		p := &probes[i]
		v, ok := m.value(p)
		if !p.Done {
			continue
		}
		if i >= len(probes)-sparkMax {
			chart = append(chart, sparkPoint{v: v, ok: ok, failed: !p.Timed()}) // a short answer without this metric is a gap, not a failure
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
	row.Spark = sparkline(chart, limit, m.Lower)
	row.SparkCaption = fmt.Sprintf("%s of the last %d probes", m.Name, len(chart))
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
	case v < 1:
		return fmt.Sprintf("%.1f ms", v*1000)
	default:
		return fmt.Sprintf("%.2f s", v)
	}
}

type sparkPoint struct {
	v      float64
	ok     bool // v is a valid value
	failed bool // the probe failed (drawn as a red tick)
}

const sparkW, sparkH = 150, 32

// sparkMax is how many of the latest probes a sparkline draws: more would
// not fit its width.
const sparkMax = 60

// sparkline draws the values as an inline SVG polyline, oldest on the
// left, with the threshold as a dashed line and failed probes as red ticks
// on the baseline. It needs no script and no external asset.
func sparkline(pts []sparkPoint, limit float64, lower bool) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="spark" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`, sparkW, sparkH, sparkW, sparkH)
	// The scale starts at zero and tops the largest value by a quarter;
	// the threshold joins it once a value comes within half of it, so a
	// far-off threshold does not flatten the line.
	top := 0.0
	for _, p := range pts {
		if p.ok && p.v > top {
			top = p.v
		}
	}
	hi := top * 1.25
	if limit > 0 && top*2 >= limit {
		hi = max(hi, limit*1.15)
	}
	if hi <= 0 {
		hi = 1
	}
	const pad = 3.0
	x := func(i int) float64 {
		if len(pts) <= 1 {
			return sparkW / 2
		}
		return pad + float64(i)*(sparkW-2*pad)/float64(len(pts)-1)
	}
	y := func(v float64) float64 { return sparkH - pad - v/hi*(sparkH-2*pad) }
	if limit > 0 && limit <= hi && top > 0 {
		fmt.Fprintf(&b, `<line class="limit" x1="0" x2="%d" y1="%.1f" y2="%.1f"/>`, sparkW, y(limit), y(limit))
	}
	var line, dots []string
	var last string
	for i, p := range pts {
		switch {
		case p.ok:
			pt := fmt.Sprintf("%.1f,%.1f", x(i), y(p.v))
			line = append(line, pt)
			cls := "dot"
			if limit > 0 && ((lower && p.v > limit) || (!lower && p.v < limit)) {
				cls = "dot over"
				dots = append(dots, fmt.Sprintf(`<circle class="%s" cx="%.1f" cy="%.1f" r="2"/>`, cls, x(i), y(p.v)))
			}
			last = fmt.Sprintf(`<circle class="%s" cx="%.1f" cy="%.1f" r="2"/>`, cls, x(i), y(p.v))
		case p.failed:
			fmt.Fprintf(&b, `<line class="fail" x1="%.1f" x2="%.1f" y1="%d" y2="%d"/>`, x(i), x(i), sparkH, sparkH-8)
		}
	}
	if len(line) > 1 {
		fmt.Fprintf(&b, `<polyline class="series" points="%s"/>`, strings.Join(line, " "))
	}
	b.WriteString(strings.Join(dots, ""))
	b.WriteString(last)
	if len(pts) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="none">no probe yet</text>`, sparkW/2, sparkH/2+4)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
