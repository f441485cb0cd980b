package report

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strconv"
	"strings"
)

// A small SVG chart builder: line series, filled range bands, threshold
// lines, experience bands behind the plot, linear or log axes with nice
// ticks, an optional right axis, and <title> tooltips on every point. All
// text goes through esc; numbers are formatted by us. The output is trusted
// HTML for html/template.

const (
	chartW = 640.0
	chartH = 330.0
)

var esc = template.HTMLEscapeString

// axis describes one axis. Min and Max fix the domain when Max > Min;
// otherwise it is fitted to the data and the reference lines.
type axis struct {
	Label    string
	Log      bool
	Fmt      func(float64) string
	Ticks    []float64 // explicit ticks (x axis: the measured N or contexts)
	Min, Max float64
	FromZero bool // a linear axis starts at 0
}

type point struct {
	X, Y float64
	Tip  string // tooltip text
	// Suspect marks a point measured on a step that started on a busy
	// engine: drawn hollow with a red ring, and named in the legend.
	Suspect bool
}

type series struct {
	Name   string
	Color  string
	Marker int // 0 circle, 1 square, 2 triangle, 3 diamond
	Dashed bool
	// Faint draws the series light, with hollow markers: a comparison's
	// baseline, beside NEW's series of the same colour.
	Faint  bool
	Right  bool // plotted against the right axis
	Points []point
}

// area is a filled band between Hi and Lo (same X values).
type area struct {
	Name   string
	Color  string
	Hi, Lo []point
}

type refLine struct {
	Value    float64
	Label    string
	Color    string
	Right    bool // horizontal line on the right axis
	Vertical bool // vertical line at x = Value
}

// Experience levels, best first; they index levelNames and the CSS classes.
type level int

const (
	excellent level = iota
	good
	acceptable
	poor
)

var levelNames = [...]string{"excellent", "good", "acceptable", "poor"}

// expBand shades Y values in [Lo, Hi) with a level's colour; use ±Inf for
// open ends.
type expBand struct {
	Lo, Hi float64
	Level  level
}

type chart struct {
	ID     string // unique within the page; used for the clip path
	Title  string // accessible name
	Desc   string
	X, Y   axis
	Y2     *axis
	Series []series
	Areas  []area
	Refs   []refLine
	Bands  []expBand
	Empty  string // text shown when there is nothing to plot
}

// scale maps a domain onto a pixel range.
type scale struct {
	log      bool
	lo, hi   float64
	p0, p1   float64 // pixels for lo and hi
	ticks    []float64
	fmt      func(float64) string
	hasRange bool
}

func (s scale) px(v float64) float64 {
	var t float64
	if s.log {
		if v <= 0 {
			v = s.lo
		}
		t = (math.Log(v) - math.Log(s.lo)) / (math.Log(s.hi) - math.Log(s.lo))
	} else {
		t = (v - s.lo) / (s.hi - s.lo)
	}
	return s.p0 + t*(s.p1-s.p0)
}

func (s scale) contains(v float64) bool {
	lo, hi := s.lo, s.hi
	const eps = 1e-9
	return v >= lo-eps*math.Abs(lo) && v <= hi+eps*math.Abs(hi)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// clean drops binary noise such as 0.30000000000000004 from a tick value.
func clean(v float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 10, 64), 64)
	if err != nil {
		return v
	}
	return r
}

// niceStep returns a 1/2/2.5/5 x 10^k step that cuts span into about n parts.
func niceStep(span float64, n int) float64 {
	if span <= 0 || !finite(span) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch r := raw / mag; {
	case r <= 1:
		return mag
	case r <= 2:
		return 2 * mag
	case r <= 2.5:
		return 2.5 * mag
	case r <= 5:
		return 5 * mag
	default:
		return 10 * mag
	}
}

func linearScale(a axis, vals []float64) scale {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if finite(v) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if a.Max > a.Min {
		lo, hi = a.Min, a.Max
	} else {
		if lo > hi { // no data
			lo, hi = 0, 1
		}
		if a.FromZero && lo > 0 {
			lo = 0
		}
		if hi == lo {
			hi = lo + 1
		}
	}
	step := niceStep(hi-lo, 5)
	lo = math.Floor(lo/step+1e-9) * step
	hi = math.Ceil(hi/step-1e-9) * step
	var ticks []float64
	for i := 0; lo+float64(i)*step <= hi+step/2; i++ {
		ticks = append(ticks, clean(lo+float64(i)*step))
	}
	return scale{lo: lo, hi: hi, ticks: ticks, hasRange: true}
}

// logScale fits a log axis to 1/2/5 x 10^k boundaries.
func logScale(a axis, vals []float64) scale {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vals {
		if finite(v) && v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if a.Max > a.Min && a.Min > 0 {
		lo, hi = a.Min, a.Max
	}
	if lo > hi {
		lo, hi = 1, 10
	}
	seq := func(k float64) []float64 {
		m := math.Pow(10, k)
		return []float64{m, 2 * m, 5 * m}
	}
	var cands []float64
	for k := math.Floor(math.Log10(lo)) - 1; k <= math.Ceil(math.Log10(hi))+1; k++ {
		cands = append(cands, seq(k)...)
	}
	l, h := cands[0], cands[len(cands)-1]
	for _, c := range cands {
		if c <= lo*(1+1e-9) {
			l = c
		}
	}
	for i := len(cands) - 1; i >= 0; i-- {
		if cands[i] >= hi*(1-1e-9) {
			h = cands[i]
		}
	}
	if h <= l {
		h = l * 10
	}
	var ticks []float64
	decades := math.Log10(h / l)
	for _, c := range cands {
		if c < l*(1-1e-9) || c > h*(1+1e-9) {
			continue
		}
		first := c / math.Pow(10, math.Floor(math.Log10(c)+1e-9))
		if decades > 3 && math.Abs(first-1) > 1e-6 {
			continue
		}
		ticks = append(ticks, c)
	}
	return scale{log: true, lo: l, hi: h, ticks: ticks, hasRange: true}
}

// explicitScale uses the given ticks (x axis).
func explicitScale(a axis, vals []float64) scale {
	ticks := append([]float64(nil), a.Ticks...)
	sort.Float64s(ticks)
	all := append(append([]float64(nil), vals...), ticks...)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range all {
		if finite(v) && (!a.Log || v > 0) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if lo > hi {
		lo, hi = 1, 2
	}
	if hi == lo {
		if a.Log {
			lo, hi = lo/2, hi*2
		} else {
			lo, hi = lo-1, hi+1
		}
	}
	return scale{log: a.Log, lo: lo, hi: hi, ticks: ticks, hasRange: true}
}

func fitScale(a axis, vals []float64) scale {
	var s scale
	switch {
	case len(a.Ticks) > 0:
		s = explicitScale(a, vals)
	case a.Log:
		s = logScale(a, vals)
	default:
		s = linearScale(a, vals)
	}
	s.fmt = a.Fmt
	if s.fmt == nil {
		s.fmt = func(v float64) string { return fmt.Sprintf("%g", v) }
	}
	return s
}

// approxTextWidth estimates the width of an 11px label.
func approxTextWidth(s string) float64 { return float64(len([]rune(s))) * 6.4 }

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

// box is a label's bounding box in pixels.
type box struct{ x0, y0, x1, y1 float64 }

func (a box) overlaps(b box) bool { return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1 }

// labelBox returns the box of an 11.5px bold label drawn at (x, y)
// (baseline). Measured in Chromium with DejaVu Sans, such labels run 6.7 to
// 7.1 px per character; 7.2 leaves a margin for wider fonts.
func labelBox(x, y float64, anchor, text string) box {
	w := approxTextWidth(text) * 1.12
	switch anchor {
	case "end":
		return box{x - w, y - 11, x, y + 3}
	case "middle":
		return box{x - w/2, y - 11, x + w/2, y + 3}
	}
	return box{x, y - 11, x + w, y + 3}
}

// obstacles are what a label must not cover: sampled points along every
// plotted line and every marker, the reference lines, and the labels
// already placed.
type obstacles struct {
	pts    [][2]float64
	refs   []refObstacle
	placed []box
}

// refObstacle is a reference line as a thin box; ref is its index in
// chart.Refs, so that a label does not count its own line.
type refObstacle struct {
	b   box
	ref int
}

func (o *obstacles) addSegment(ax, ay, bx, by float64) {
	n := int(math.Max(1, math.Hypot(bx-ax, by-ay)/2))
	for i := 0; i <= n; i++ {
		t := float64(i) / float64(n)
		o.pts = append(o.pts, [2]float64{ax + t*(bx-ax), ay + t*(by-ay)})
	}
}

// cost counts what a box would cover: placed labels weigh most, then
// other reference lines (a label across the capacity line or another
// threshold reads as belonging to it), then data.
func (o *obstacles) cost(b box, self int) int {
	c := 0
	in := box{b.x0 - 2, b.y0 - 2, b.x1 + 2, b.y1 + 2}
	for _, p := range o.pts {
		if p[0] >= in.x0 && p[0] <= in.x1 && p[1] >= in.y0 && p[1] <= in.y1 {
			c++
		}
	}
	for _, r := range o.refs {
		if r.ref != self && r.b.overlaps(in) {
			c += 400
		}
	}
	for _, p := range o.placed {
		if p.overlaps(in) {
			c += 1000
		}
	}
	return c
}

type placedLabel struct {
	x, y   float64
	anchor string
}

// place picks the candidate position that covers the least; ties keep the
// earlier (preferred) candidate.
func (o *obstacles) place(text string, self int, cands []placedLabel, plot box) placedLabel {
	best, bestCost := cands[0], math.MaxInt
	for _, c := range cands {
		b := labelBox(c.x, c.y, c.anchor, text)
		if b.y0 < plot.y0 || b.y1 > plot.y1 || b.x0 < plot.x0-2 || b.x1 > plot.x1+2 {
			continue
		}
		if k := o.cost(b, self); k < bestCost {
			best, bestCost = c, k
		}
	}
	o.placed = append(o.placed, labelBox(best.x, best.y, best.anchor, text))
	return best
}

// layout is where a chart's plot area and scales fall, in pixels.
type layout struct {
	x0, x1, y0, y1 float64 // plot edges; y0 is the bottom
	plot           box
	xsc, ysc, y2sc scale
	hasData        bool
}

// yOf returns the scale of the left or right axis.
func (l layout) yOf(right bool) scale {
	if right {
		return l.y2sc
	}
	return l.ysc
}

// refY is the pixel height of a horizontal reference line.
func (l layout) refY(r refLine) float64 { return l.yOf(r.Right).px(r.Value) }

// layout fits the axes to the data and the reference lines.
func (c *chart) layout() layout {
	left, right, top, bottom := 64.0, 22.0, 14.0, 50.0
	switch {
	case c.Y2 != nil:
		right = 64
	case len(c.Bands) > 0:
		right = 86 // room for the band names
	}
	x0, x1 := left, chartW-right
	y0, y1 := chartH-bottom, top // pixel y of domain low and high

	// Collect values per axis.
	var xs, ys, y2s []float64
	for _, s := range c.Series {
		for _, p := range s.Points {
			xs = append(xs, p.X)
			if s.Right {
				y2s = append(y2s, p.Y)
			} else {
				ys = append(ys, p.Y)
			}
		}
	}
	for _, a := range c.Areas {
		for _, p := range append(append([]point(nil), a.Hi...), a.Lo...) {
			xs = append(xs, p.X)
			ys = append(ys, p.Y)
		}
	}
	hasData := len(xs) > 0
	for _, r := range c.Refs {
		switch {
		case r.Vertical:
			xs = append(xs, r.Value)
		case r.Right:
			y2s = append(y2s, r.Value, r.Value*1.1) // headroom for the label
		default:
			ys = append(ys, r.Value, r.Value*1.1)
		}
	}
	xsc := fitScale(c.X, xs)
	// Keep end markers off the axes.
	xsc.p0, xsc.p1 = x0+14, x1-14
	ysc := fitScale(c.Y, ys)
	ysc.p0, ysc.p1 = y0, y1
	var y2sc scale
	if c.Y2 != nil {
		y2sc = fitScale(*c.Y2, y2s)
		y2sc.p0, y2sc.p1 = y0, y1
	}
	return layout{x0: x0, x1: x1, y0: y0, y1: y1, plot: box{x0, y1, x1, y0}, xsc: xsc, ysc: ysc, y2sc: y2sc, hasData: hasData}
}

// SVG renders the chart; the legend is rendered separately by LegendHTML.
func (c *chart) SVG() template.HTML {
	l := c.layout()
	x0, x1, y0, y1, plot := l.x0, l.x1, l.y0, l.y1, l.plot
	xsc, ysc, y2sc := l.xsc, l.ysc, l.y2sc
	hasData := l.hasData
	yOf := l.yOf

	var b strings.Builder
	tid := c.ID + "-t"
	fmt.Fprintf(&b, `<svg class="plot" viewBox="0 0 %g %g" role="img" aria-labelledby="%s">`, chartW, chartH, esc(tid))
	fmt.Fprintf(&b, `<title id="%s">%s</title>`, esc(tid), esc(c.Title))
	if c.Desc != "" {
		fmt.Fprintf(&b, `<desc>%s</desc>`, esc(c.Desc))
	}
	clip := c.ID + "-clip"
	fmt.Fprintf(&b, `<defs><clipPath id="%s"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath></defs>`,
		esc(clip), f1(x0), f1(y1), f1(x1-x0), f1(y0-y1))

	// Experience bands behind everything, named in the right margin.
	for _, band := range c.Bands {
		lo, hi := math.Max(band.Lo, ysc.lo), math.Min(band.Hi, ysc.hi)
		if !(hi > lo) {
			continue
		}
		pyLo, pyHi := ysc.px(lo), ysc.px(hi)
		name := levelNames[band.Level]
		fmt.Fprintf(&b, `<rect class="band band-%s" x="%s" y="%s" width="%s" height="%s"><title>%s</title></rect>`,
			name, f1(x0), f1(pyHi), f1(x1-x0), f1(pyLo-pyHi), esc(name))
		if c.Y2 == nil && pyLo-pyHi >= 12 {
			fmt.Fprintf(&b, `<text class="band-label band-label-%s" x="%s" y="%s" dominant-baseline="middle">%s</text>`,
				name, f1(x1+7), f1((pyLo+pyHi)/2), esc(name))
		}
	}

	// Grid lines and axes.
	b.WriteString(`<g class="gridlines">`)
	for _, t := range ysc.ticks {
		if ysc.contains(t) {
			fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s"/>`, f1(x0), f1(x1), f1(ysc.px(t)), f1(ysc.px(t)))
		}
	}
	for _, t := range xsc.ticks {
		fmt.Fprintf(&b, `<line class="v" x1="%s" x2="%s" y1="%s" y2="%s"/>`, f1(xsc.px(t)), f1(xsc.px(t)), f1(y0), f1(y1))
	}
	b.WriteString(`</g><g class="axes">`)
	fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s"/>`, f1(x0), f1(x1), f1(y0), f1(y0))
	fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s"/>`, f1(x0), f1(x0), f1(y0), f1(y1))
	for _, t := range ysc.ticks {
		if ysc.contains(t) {
			fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="end" dominant-baseline="middle">%s</text>`,
				f1(x0-6), f1(ysc.px(t)), esc(ysc.fmt(t)))
		}
	}
	if c.Y2 != nil {
		fmt.Fprintf(&b, `<line x1="%s" x2="%s" y1="%s" y2="%s"/>`, f1(x1), f1(x1), f1(y0), f1(y1))
		for _, t := range y2sc.ticks {
			if y2sc.contains(t) {
				fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="start" dominant-baseline="middle">%s</text>`,
					f1(x1+6), f1(y2sc.px(t)), esc(y2sc.fmt(t)))
			}
		}
	}
	// X tick labels, dropping any that would overlap the previous one.
	lastEnd := math.Inf(-1)
	for _, t := range xsc.ticks {
		label := xsc.fmt(t)
		w := approxTextWidth(label)
		px := xsc.px(t)
		if px-w/2 < lastEnd+6 {
			continue
		}
		lastEnd = px + w/2
		fmt.Fprintf(&b, `<text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`, f1(px), f1(y0+16), esc(label))
	}
	fmt.Fprintf(&b, `<text class="axis-label" x="%s" y="%s" text-anchor="middle">%s</text>`, f1((x0+x1)/2), f1(chartH-10), esc(c.X.Label))
	fmt.Fprintf(&b, `<text class="axis-label" transform="translate(16 %s) rotate(-90)" text-anchor="middle">%s</text>`, f1((y0+y1)/2), esc(c.Y.Label))
	if c.Y2 != nil {
		fmt.Fprintf(&b, `<text class="axis-label" transform="translate(%s %s) rotate(90)" text-anchor="middle">%s</text>`, f1(chartW-12), f1((y0+y1)/2), esc(c.Y2.Label))
	}
	b.WriteString(`</g>`)

	if !hasData {
		msg := c.Empty
		if msg == "" {
			msg = "No data measured for this chart."
		}
		fmt.Fprintf(&b, `<text class="empty" x="%s" y="%s" text-anchor="middle">%s</text></svg>`, f1((x0+x1)/2), f1((y0+y1)/2), esc(msg))
		return template.HTML(b.String())
	}

	var obs obstacles
	fmt.Fprintf(&b, `<g clip-path="url(#%s)">`, esc(clip))
	// Range bands.
	for _, a := range c.Areas {
		if len(a.Hi) == 0 {
			continue
		}
		var pts []string
		for _, p := range a.Hi {
			pts = append(pts, f1(xsc.px(p.X))+","+f1(ysc.px(p.Y)))
		}
		for i := len(a.Lo) - 1; i >= 0; i-- {
			pts = append(pts, f1(xsc.px(a.Lo[i].X))+","+f1(ysc.px(a.Lo[i].Y)))
		}
		fmt.Fprintf(&b, `<polygon class="area" points="%s" fill="%s"><title>%s</title></polygon>`, strings.Join(pts, " "), esc(a.Color), esc(a.Name))
		for _, edge := range [][]point{a.Hi, a.Lo} {
			var d strings.Builder
			for i, p := range edge {
				cmd := "L"
				if i == 0 {
					cmd = "M"
				} else {
					obs.addSegment(xsc.px(edge[i-1].X), ysc.px(edge[i-1].Y), xsc.px(p.X), ysc.px(p.Y))
				}
				fmt.Fprintf(&d, "%s%s %s ", cmd, f1(xsc.px(p.X)), f1(ysc.px(p.Y)))
			}
			fmt.Fprintf(&b, `<path class="line edge" d="%s" stroke="%s"/>`, strings.TrimSpace(d.String()), esc(a.Color))
		}
	}
	// Reference lines, under the data.
	for _, r := range c.Refs {
		if r.Vertical {
			px := xsc.px(r.Value)
			fmt.Fprintf(&b, `<line class="ref" x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s"/>`, f1(px), f1(px), f1(y0), f1(y1), esc(r.Color))
			continue
		}
		py := yOf(r.Right).px(r.Value)
		fmt.Fprintf(&b, `<line class="ref" x1="%s" x2="%s" y1="%s" y2="%s" stroke="%s"/>`, f1(x0), f1(x1), f1(py), f1(py), esc(r.Color))
	}
	b.WriteString(`</g>`)

	// Series.
	for _, s := range c.Series {
		sc := yOf(s.Right)
		pts := append([]point(nil), s.Points...)
		sort.SliceStable(pts, func(i, j int) bool { return pts[i].X < pts[j].X })
		var d strings.Builder
		for i, p := range pts {
			cmd := "L"
			if i == 0 {
				cmd = "M"
			} else {
				obs.addSegment(xsc.px(pts[i-1].X), sc.px(pts[i-1].Y), xsc.px(p.X), sc.px(p.Y))
			}
			fmt.Fprintf(&d, "%s%s %s ", cmd, f1(xsc.px(p.X)), f1(sc.px(p.Y)))
		}
		cls := "line"
		if s.Dashed {
			cls += " dashed"
		}
		gcls := "series"
		if s.Faint {
			gcls += " faint"
		}
		fmt.Fprintf(&b, `<g class="%s" data-series="%s"><path class="%s" d="%s" stroke="%s"/>`, gcls, esc(s.Name), cls, strings.TrimSpace(d.String()), esc(s.Color))
		for _, p := range pts {
			fmt.Fprintf(&b, `<g class="pt"><title>%s</title>%s</g>`, esc(p.Tip), marker(s.Marker, xsc.px(p.X), sc.px(p.Y), s.Color, p.Suspect))
		}
		b.WriteString(`</g>`)
	}
	for _, a := range c.Areas {
		for _, edge := range [][]point{a.Hi, a.Lo} {
			for _, p := range edge {
				fmt.Fprintf(&b, `<g class="pt"><title>%s</title>%s</g>`, esc(p.Tip), marker(0, xsc.px(p.X), ysc.px(p.Y), a.Color, p.Suspect))
			}
		}
	}

	// Reference labels last, on top, where they cover the least data.
	// Vertical ones first: they have fewer good spots.
	for i, r := range c.Refs {
		if r.Vertical {
			px := xsc.px(r.Value)
			obs.refs = append(obs.refs, refObstacle{box{px - 1, y1, px + 1, y0}, i})
		} else {
			py := yOf(r.Right).px(r.Value)
			obs.refs = append(obs.refs, refObstacle{box{x0, py - 1, x1, py + 1}, i})
		}
	}
	order := make([]int, len(c.Refs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return c.Refs[order[i]].Vertical && !c.Refs[order[j]].Vertical })
	for _, i := range order {
		r := c.Refs[i]
		if r.Label == "" {
			continue
		}
		var cands []placedLabel
		if r.Vertical {
			px := xsc.px(r.Value)
			for _, y := range []float64{y1 + 13, y1 + 28, y1 + 43, (y0 + y1) / 2, y0 - 23, y0 - 8} {
				cands = append(cands, placedLabel{px + 5, y, "start"}, placedLabel{px - 5, y, "end"})
			}
		} else {
			py := yOf(r.Right).px(r.Value)
			// Next to the line first; a line-width further only when
			// both sides are taken (two thresholds at one value).
			for _, dy := range []float64{-5, 14, -19, 28} {
				cands = append(cands,
					placedLabel{x1 - 6, py + dy, "end"},
					placedLabel{x0 + 6, py + dy, "start"},
					placedLabel{(x0 + x1) / 2, py + dy, "middle"},
					placedLabel{x0 + (x1-x0)*0.75, py + dy, "middle"},
					placedLabel{x0 + (x1-x0)*0.25, py + dy, "middle"},
					placedLabel{x0 + (x1-x0)*0.62, py + dy, "middle"},
					placedLabel{x0 + (x1-x0)*0.38, py + dy, "middle"})
			}
		}
		l := obs.place(r.Label, i, cands, plot)
		fmt.Fprintf(&b, `<text class="ref-label" x="%s" y="%s" text-anchor="%s" fill="%s">%s</text>`, f1(l.x), f1(l.y), l.anchor, esc(r.Color), esc(r.Label))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// colorSuspect rings the points of steps that started on a busy engine.
const colorSuspect = "#d62728"

// marker draws one data point; a suspect one is hollow inside a red ring.
func marker(kind int, x, y float64, color string, suspect bool) string {
	fill := esc(color)
	ring := ""
	if suspect {
		fill = "#fff"
		ring = fmt.Sprintf(`<circle class="suspect" cx="%s" cy="%s" r="7.5" fill="none" stroke="%s" stroke-width="1.6" stroke-dasharray="3 2"/>`,
			f1(x), f1(y), colorSuspect)
	}
	common := fmt.Sprintf(`fill="%s" stroke="%s" class="mk"`, fill, esc(color))
	switch kind % 4 {
	case 1:
		return ring + fmt.Sprintf(`<rect x="%s" y="%s" width="7" height="7" %s/>`, f1(x-3.5), f1(y-3.5), common)
	case 2:
		return ring + fmt.Sprintf(`<path d="M%s %sL%s %sL%s %sZ" %s/>`, f1(x), f1(y-4.5), f1(x+4.2), f1(y+3.2), f1(x-4.2), f1(y+3.2), common)
	case 3:
		return ring + fmt.Sprintf(`<path d="M%s %sL%s %sL%s %sL%s %sZ" %s/>`, f1(x), f1(y-4.6), f1(x+4.6), f1(y), f1(x), f1(y+4.6), f1(x-4.6), f1(y), common)
	}
	return ring + fmt.Sprintf(`<circle cx="%s" cy="%s" r="3.6" %s/>`, f1(x), f1(y), common)
}

// hasSuspect reports whether any plotted point is suspect.
func (c *chart) hasSuspect() bool {
	for _, s := range c.Series {
		for _, p := range s.Points {
			if p.Suspect {
				return true
			}
		}
	}
	for _, a := range c.Areas {
		for _, p := range append(append([]point(nil), a.Hi...), a.Lo...) {
			if p.Suspect {
				return true
			}
		}
	}
	return false
}

// LegendHTML renders the chart's legend as HTML (it wraps; SVG text does not).
func (c *chart) LegendHTML() template.HTML {
	var b strings.Builder
	if len(c.Series) == 0 && len(c.Areas) == 0 {
		return ""
	}
	b.WriteString(`<ul class="legend">`)
	for _, s := range c.Series {
		dash, faint := "", ""
		if s.Dashed {
			dash = ` stroke-dasharray="5 3"`
		}
		if s.Faint {
			faint = ` class="faint"`
		}
		fmt.Fprintf(&b, `<li%s><svg width="30" height="12" viewBox="0 0 30 12" aria-hidden="true"><line x1="1" x2="29" y1="6" y2="6" stroke="%s" stroke-width="2"%s/>%s</svg>%s</li>`,
			faint, esc(s.Color), dash, marker(s.Marker, 15, 6, s.Color, false), esc(s.Name))
	}
	for _, a := range c.Areas {
		fmt.Fprintf(&b, `<li><svg width="30" height="12" viewBox="0 0 30 12" aria-hidden="true"><rect x="1" y="1" width="28" height="10" fill="%s" fill-opacity="0.25" stroke="%s"/></svg>%s</li>`,
			esc(a.Color), esc(a.Color), esc(a.Name))
	}
	if c.hasSuspect() {
		fmt.Fprintf(&b, `<li class="suspect-note"><svg width="30" height="18" viewBox="0 0 30 18" aria-hidden="true">%s</svg>started on a busy engine: suspect, not used for capacity or the headline</li>`,
			marker(0, 15, 9, "#52606d", true))
	}
	b.WriteString(`</ul>`)
	return template.HTML(b.String())
}
