// Package svgchart draws line charts as inline SVG: series with markers,
// filled range areas, reference lines (horizontal on either axis, or
// vertical), shaded bands behind the plot, linear or log axes with nice
// ticks, an optional right axis, <title> tooltips on every point, and a
// legend in HTML (it wraps; SVG text does not). Reference labels are placed
// where they cover the least data and no other label. Sparklines (spark.go)
// are the small kind: one series, no axes, as wide as their container.
//
// It knows axes, series, areas, lines, bands and legends, and nothing of
// what is plotted: callers name the bands, colour the series and write the
// tooltips. All text is escaped here and every number formatted here, so
// the output is trusted HTML for html/template.
package svgchart

import (
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
)

const (
	chartW = 640.0
	chartH = 330.0
)

var esc = template.HTMLEscapeString

// Axis describes one axis. Min and Max fix the domain when Max > Min;
// otherwise it is fitted to the data and the reference lines.
type Axis struct {
	Label    string
	Log      bool
	Fmt      func(float64) string
	Ticks    []float64 // explicit ticks (x axis: the measured N or contexts)
	Min, Max float64
	FromZero bool // a linear axis starts at 0
}

// Point is one data point; Tip is its tooltip.
type Point struct {
	X, Y float64
	Tip  string // tooltip text
	// Suspect marks a point the caller does not trust: drawn hollow inside
	// a red ring, and named in the legend by Chart.SuspectNote.
	Suspect bool
}

// Series is one line with its markers.
type Series struct {
	Name   string
	Color  string
	Marker int // 0 circle, 1 square, 2 triangle, 3 diamond
	Dashed bool
	// Faint draws the series light, with hollow markers: a baseline beside
	// the series of the same colour it is compared with.
	Faint  bool
	Right  bool // plotted against the right axis
	Points []Point
}

// Area is a filled band between Hi and Lo (same X values).
type Area struct {
	Name   string
	Color  string
	Hi, Lo []Point
}

// RefLine is a reference line (a threshold, a marker) with its label.
type RefLine struct {
	Value    float64
	Label    string
	Color    string
	Right    bool // horizontal line on the right axis
	Vertical bool // vertical line at x = Value
}

// Band shades Y values in [Lo, Hi) behind the plot; use ±Inf for open
// ends. Name is its label in the right margin and its CSS class (band-Name).
type Band struct {
	Lo, Hi float64
	Name   string
}

// Chart is one chart: its axes and what is drawn against them.
type Chart struct {
	ID     string // unique within the page; used for the clip path
	Title  string // accessible name
	Desc   string
	X, Y   Axis
	Y2     *Axis
	Series []Series
	Areas  []Area
	Refs   []RefLine
	Bands  []Band
	Empty  string // text shown when there is nothing to plot
	// SuspectNote is the legend's entry for suspect points (drawn hollow
	// inside a red ring); without it they have none.
	SuspectNote string
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

// SVG renders the chart; the legend is rendered separately by LegendHTML.
func (c *Chart) SVG() template.HTML {
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

	// Bands behind everything, named in the right margin.
	for _, band := range c.Bands {
		lo, hi := math.Max(band.Lo, ysc.lo), math.Min(band.Hi, ysc.hi)
		if !(hi > lo) {
			continue
		}
		pyLo, pyHi := ysc.px(lo), ysc.px(hi)
		name := band.Name
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
		for _, edge := range [][]Point{a.Hi, a.Lo} {
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
		pts := append([]Point(nil), s.Points...)
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
			fmt.Fprintf(&b, `<g class="pt"><title>%s</title>%s</g>`, esc(p.Tip), Marker(s.Marker, xsc.px(p.X), sc.px(p.Y), s.Color, p.Suspect))
		}
		b.WriteString(`</g>`)
	}
	for _, a := range c.Areas {
		for _, edge := range [][]Point{a.Hi, a.Lo} {
			for _, p := range edge {
				fmt.Fprintf(&b, `<g class="pt"><title>%s</title>%s</g>`, esc(p.Tip), Marker(0, xsc.px(p.X), ysc.px(p.Y), a.Color, p.Suspect))
			}
		}
	}

	// Reference labels last, on top, where they cover the least data.
	// Vertical ones first: they have fewer good spots.
	for i, r := range c.Refs {
		if r.Vertical {
			px := xsc.px(r.Value)
			obs.refs = append(obs.refs, refObstacle{Box{px - 1, y1, px + 1, y0}, i})
		} else {
			py := yOf(r.Right).px(r.Value)
			obs.refs = append(obs.refs, refObstacle{Box{x0, py - 1, x1, py + 1}, i})
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

// colorSuspect rings the suspect points.
const colorSuspect = "#d62728"

// Marker draws one data point; a suspect one is hollow inside a red ring.
func Marker(kind int, x, y float64, color string, suspect bool) string {
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
func (c *Chart) hasSuspect() bool {
	for _, s := range c.Series {
		for _, p := range s.Points {
			if p.Suspect {
				return true
			}
		}
	}
	for _, a := range c.Areas {
		for _, p := range append(append([]Point(nil), a.Hi...), a.Lo...) {
			if p.Suspect {
				return true
			}
		}
	}
	return false
}

// LegendHTML renders the chart's legend as HTML (it wraps; SVG text does not).
func (c *Chart) LegendHTML() template.HTML {
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
			faint, esc(s.Color), dash, Marker(s.Marker, 15, 6, s.Color, false), esc(s.Name))
	}
	for _, a := range c.Areas {
		fmt.Fprintf(&b, `<li><svg width="30" height="12" viewBox="0 0 30 12" aria-hidden="true"><rect x="1" y="1" width="28" height="10" fill="%s" fill-opacity="0.25" stroke="%s"/></svg>%s</li>`,
			esc(a.Color), esc(a.Color), esc(a.Name))
	}
	if c.SuspectNote != "" && c.hasSuspect() {
		fmt.Fprintf(&b, `<li class="suspect-note"><svg width="30" height="18" viewBox="0 0 30 18" aria-hidden="true">%s</svg>%s</li>`,
			Marker(0, 15, 9, "#52606d", true), esc(c.SuspectNote))
	}
	b.WriteString(`</ul>`)
	return template.HTML(b.String())
}
