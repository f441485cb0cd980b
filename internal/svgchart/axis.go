package svgchart

// This file holds the axes: scales fitted to the data with nice ticks,
// linear or log, the standard tick labels, and where the plot falls.

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

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

// Clean drops binary noise such as 0.30000000000000004 from a tick value.
func Clean(v float64) float64 {
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

func linearScale(a Axis, vals []float64) scale {
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
		ticks = append(ticks, Clean(lo+float64(i)*step))
	}
	return scale{lo: lo, hi: hi, ticks: ticks, hasRange: true}
}

// logScale fits a log axis to 1/2/5 x 10^k boundaries.
func logScale(a Axis, vals []float64) scale {
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
func explicitScale(a Axis, vals []float64) scale {
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

func fitScale(a Axis, vals []float64) scale {
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

// layout is where a chart's plot area and scales fall, in pixels.
type layout struct {
	x0, x1, y0, y1 float64 // plot edges; y0 is the bottom
	plot           Box
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
func (l layout) refY(r RefLine) float64 { return l.yOf(r.Right).px(r.Value) }

// layout fits the axes to the data and the reference lines.
func (c *Chart) layout() layout {
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
		for _, p := range append(append([]Point(nil), a.Hi...), a.Lo...) {
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
	return layout{x0: x0, x1: x1, y0: y0, y1: y1, plot: Box{x0, y1, x1, y0}, xsc: xsc, ysc: ysc, y2sc: y2sc, hasData: hasData}
}

// TickSeconds labels a tick in seconds: "0", "250 ms", "1.5 s".
func TickSeconds(v float64) string {
	if v == 0 {
		return "0"
	}
	if v < 1 {
		return strconv.FormatFloat(Clean(v*1000), 'f', -1, 64) + " ms"
	}
	return strconv.FormatFloat(Clean(v), 'f', -1, 64) + " s"
}

// TickRate labels a tick of a rate: "850", "12k".
func TickRate(v float64) string {
	if v >= 10000 {
		return strconv.FormatFloat(Clean(v/1000), 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(Clean(v), 'f', -1, 64)
}

// TickPlain labels a tick with its value as it is.
func TickPlain(v float64) string { return strconv.FormatFloat(Clean(v), 'f', -1, 64) }
