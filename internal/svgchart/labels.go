package svgchart

// This file holds the placement of reference labels where they cover the
// least, and the separation of the two axes' reference lines.

import (
	"math"
)

// approxTextWidth estimates the width of an 11px label.
func approxTextWidth(s string) float64 { return float64(len([]rune(s))) * 6.4 }

// Box is a label's bounding box in pixels.
type Box struct{ X0, Y0, X1, Y1 float64 }

// Overlaps reports whether a and b share any area.
func (a Box) Overlaps(b Box) bool { return a.X0 < b.X1 && b.X0 < a.X1 && a.Y0 < b.Y1 && b.Y0 < a.Y1 }

// LabelBox returns the box of an 11.5px bold label drawn at (x, y)
// (baseline). Measured in Chromium with DejaVu Sans, such labels run 6.7 to
// 7.1 px per character; 7.2 leaves a margin for wider fonts.
func LabelBox(x, y float64, anchor, text string) Box {
	w := approxTextWidth(text) * 1.12
	switch anchor {
	case "end":
		return Box{x - w, y - 11, x, y + 3}
	case "middle":
		return Box{x - w/2, y - 11, x + w/2, y + 3}
	}
	return Box{x, y - 11, x + w, y + 3}
}

// obstacles are what a label must not cover: sampled points along every
// plotted line and every marker, the reference lines, and the labels
// already placed.
type obstacles struct {
	pts    [][2]float64
	refs   []refObstacle
	placed []Box
}

// refObstacle is a reference line as a thin box; ref is its index in
// chart.Refs, so that a label does not count its own line.
type refObstacle struct {
	b   Box
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
// other reference lines (a label across another line reads as belonging
// to it), then data.
func (o *obstacles) cost(b Box, self int) int {
	c := 0
	in := Box{b.X0 - 2, b.Y0 - 2, b.X1 + 2, b.Y1 + 2}
	for _, p := range o.pts {
		if p[0] >= in.X0 && p[0] <= in.X1 && p[1] >= in.Y0 && p[1] <= in.Y1 {
			c++
		}
	}
	for _, r := range o.refs {
		if r.ref != self && r.b.Overlaps(in) {
			c += 400
		}
	}
	for _, p := range o.placed {
		if p.Overlaps(in) {
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
func (o *obstacles) place(text string, self int, cands []placedLabel, plot Box) placedLabel {
	best, bestCost := cands[0], math.MaxInt
	for _, c := range cands {
		b := LabelBox(c.x, c.y, c.anchor, text)
		if b.Y0 < plot.Y0 || b.Y1 > plot.Y1 || b.X0 < plot.X0-2 || b.X1 > plot.X1+2 {
			continue
		}
		if k := o.cost(b, self); k < bestCost {
			best, bestCost = c, k
		}
	}
	o.placed = append(o.placed, LabelBox(best.x, best.y, best.anchor, text))
	return best
}

// MinRefGap is how far apart (px) two threshold lines on different axes
// must lie: a label's height and a little air, so neither line nor label
// sits on the other.
const MinRefGap = 20.0

// refGap is the smallest distance between two horizontal reference lines
// of different axes (Inf when there is no such pair).
func (c *Chart) refGap(l layout) float64 {
	gap := math.Inf(1)
	for i, a := range c.Refs {
		for _, b := range c.Refs[i+1:] {
			if a.Vertical || b.Vertical || a.Right == b.Right {
				continue
			}
			gap = math.Min(gap, math.Abs(l.refY(a)-l.refY(b)))
		}
	}
	return gap
}

// SeparateRefs keeps the horizontal reference lines of the left and the
// right axis apart: two scales that happen to put them at the same height
// would draw one line on top of the other. It stretches the top of the left
// axis, then if need be the right one, by the least that gives MinRefGap;
// the data always stays inside the axes. Charts without a right axis are
// left as they are.
func (c *Chart) SeparateRefs() {
	if c.Y2 == nil {
		return
	}
	l := c.layout()
	if c.refGap(l) >= MinRefGap {
		return
	}
	base, baseY2 := c.Y, *c.Y2
	leftHi, rightLo, rightHi := l.ysc.hi, l.y2sc.lo, l.y2sc.hi
	bestGap, best := c.refGap(l), [2]float64{1, 1}
	for _, right := range []float64{1, 2, 5, 10} {
		for _, left := range []float64{1, 1.2, 1.4, 1.7, 2, 2.5, 3} {
			if left == 1 && right == 1 {
				continue
			}
			c.Y, *c.Y2 = base, baseY2
			c.stretch(left, right, leftHi, rightLo, rightHi)
			if g := c.refGap(c.layout()); g >= MinRefGap {
				return
			} else if g > bestGap {
				bestGap, best = g, [2]float64{left, right}
			}
		}
	}
	c.Y, *c.Y2 = base, baseY2
	c.stretch(best[0], best[1], leftHi, rightLo, rightHi)
}

func (c *Chart) stretch(left, right, leftHi, rightLo, rightHi float64) {
	if left != 1 {
		c.Y.Min, c.Y.Max = 0, leftHi*left
	}
	if right != 1 {
		c.Y2.Min, c.Y2.Max = rightLo, rightHi*right
	}
}
