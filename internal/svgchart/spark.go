package svgchart

// This file holds sparklines: one series of recent values, small and
// without axes, as wide as whatever holds it.

import (
	"fmt"
	"html/template"
	"strings"
)

// SparkPoint is one value of a sparkline.
type SparkPoint struct {
	V  float64
	OK bool // V is a value; without one the point is a gap
	// Failed marks a point with no value because what it measures failed:
	// a red tick on the baseline.
	Failed bool
}

// Sparkline is a line of recent values, oldest on the left, with a dashed
// threshold, the values past it marked, and failures as ticks on the
// baseline. Its SVG fills the width of its container (width 100 %, a
// viewBox stretched to it) at SparkHeight pixels; strokes and dots keep
// their size however far it stretches.
type Sparkline struct {
	Title  string // accessible name and tooltip
	Points []SparkPoint
	// Limit is the threshold (0: none); Lower says lower values are
	// better, so values above Limit are past it (below it otherwise).
	Limit float64
	Lower bool
	Empty string // shown when there is no point
}

// SparkHeight is a sparkline's height in pixels.
const SparkHeight = 32

// The viewBox is sparkW units wide, stretched to any width; sparkPad keeps
// the first and last dots inside it.
const (
	sparkW   = 100.0
	sparkPad = 3.0
)

// Colours of a sparkline; a page may restyle its classes.
const (
	sparkLine = "#0969da"
	sparkPast = "#bc4c00"
	sparkFail = "#cf222e"
)

// SVG renders the sparkline.
func (s *Sparkline) SVG() template.HTML {
	var b strings.Builder
	const h = float64(SparkHeight)
	title := fmt.Sprintf(`<title>%s</title>`, esc(s.Title))
	if len(s.Points) == 0 {
		// Not stretched, so that the text keeps its shape.
		fmt.Fprintf(&b, `<svg class="spark" width="100%%" height="%d" viewBox="0 0 %g %g" role="img">%s`, SparkHeight, sparkW, h, title)
		empty := s.Empty
		if empty == "" {
			empty = "no data"
		}
		fmt.Fprintf(&b, `<text class="none" x="%g" y="%g" text-anchor="middle" font-size="11" fill="#59636e">%s</text></svg>`, sparkW/2, h/2+4, esc(empty))
		return template.HTML(b.String())
	}
	fmt.Fprintf(&b, `<svg class="spark" width="100%%" height="%d" viewBox="0 0 %g %g" preserveAspectRatio="none" role="img">%s`, SparkHeight, sparkW, h, title)
	// The scale starts at zero and tops the largest value by a quarter;
	// the threshold joins it once a value comes within half of it, so a
	// far-off threshold does not flatten the line.
	top := 0.0
	for _, p := range s.Points {
		if p.OK && p.V > top {
			top = p.V
		}
	}
	hi := top * 1.25
	if s.Limit > 0 && top*2 >= s.Limit {
		hi = max(hi, s.Limit*1.15)
	}
	if hi <= 0 {
		hi = 1
	}
	ys := scale{lo: 0, hi: hi, p0: h - sparkPad, p1: sparkPad}
	xs := scale{lo: 0, hi: float64(len(s.Points) - 1), p0: sparkPad, p1: sparkW - sparkPad}
	x := func(i int) float64 {
		if len(s.Points) == 1 {
			return sparkW / 2
		}
		return xs.px(float64(i))
	}
	// Every stroke keeps its width when the viewBox stretches; a dot is a
	// round cap on a zero-length path, so it stays round.
	const keep = ` vector-effect="non-scaling-stroke"`
	if s.Limit > 0 && s.Limit <= hi && top > 0 {
		fmt.Fprintf(&b, `<line class="limit" x1="0" x2="%g" y1="%s" y2="%s" stroke="%s" stroke-width="1" stroke-dasharray="4 3"%s/>`,
			sparkW, f1(ys.px(s.Limit)), f1(ys.px(s.Limit)), sparkFail, keep)
	}
	past := func(v float64) bool { return s.Limit > 0 && ((s.Lower && v > s.Limit) || (!s.Lower && v < s.Limit)) }
	dot := func(i int, v float64) string {
		cls, color := "dot", sparkLine
		if past(v) {
			cls, color = "dot over", sparkPast
		}
		return fmt.Sprintf(`<path class="%s" d="M%s %sh0" stroke="%s" stroke-width="4" stroke-linecap="round"%s/>`, cls, f1(x(i)), f1(ys.px(v)), color, keep)
	}
	var line []string
	lastOK := -1
	for i, p := range s.Points {
		switch {
		case p.OK:
			line = append(line, f1(x(i))+","+f1(ys.px(p.V)))
			lastOK = i
		case p.Failed:
			fmt.Fprintf(&b, `<line class="fail" x1="%s" x2="%s" y1="%g" y2="%g" stroke="%s" stroke-width="2"%s/>`, f1(x(i)), f1(x(i)), h, h-8, sparkFail, keep)
		}
	}
	if len(line) > 1 {
		fmt.Fprintf(&b, `<polyline class="series" points="%s" fill="none" stroke="%s" stroke-width="1.5" stroke-linejoin="round"%s/>`, strings.Join(line, " "), sparkLine, keep)
	}
	// A dot on every value past the threshold, and on the latest.
	for i, p := range s.Points {
		if p.OK && (past(p.V) || i == lastOK) {
			b.WriteString(dot(i, p.V))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}
