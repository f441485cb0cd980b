package report

import (
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestLinearTicksAreClean(t *testing.T) {
	s := fitScale(axis{FromZero: true, Fmt: axisSeconds}, []float64{0.012, 0.303})
	var labels []string
	for _, v := range s.ticks {
		labels = append(labels, s.fmt(v))
	}
	want := []string{"0", "100 ms", "200 ms", "300 ms", "400 ms"} // 3 × 0.1 is not 0.3 in binary
	if !reflect.DeepEqual(labels, want) {
		t.Errorf("ticks = %q; want %q", labels, want)
	}
	if s.lo != 0 || s.hi < 0.303 {
		t.Errorf("domain = [%g, %g]", s.lo, s.hi)
	}
}

func TestNiceStep(t *testing.T) {
	for _, c := range []struct {
		span float64
		want float64
	}{{100, 20}, {1, 0.2}, {7, 2}, {0.3, 0.1}, {4000, 1000}, {0, 1}} {
		if got := niceStep(c.span, 5); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("niceStep(%g) = %g; want %g", c.span, got, c.want)
		}
	}
}

func TestLogTicks(t *testing.T) {
	s := fitScale(axis{Log: true}, []float64{0.189, 72.7, 3.0})
	if s.lo != 0.1 || s.hi != 100 {
		t.Errorf("domain = [%g, %g]; want [0.1, 100]", s.lo, s.hi)
	}
	want := []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100}
	if !reflect.DeepEqual(s.ticks, want) {
		t.Errorf("ticks = %v; want %v", s.ticks, want)
	}
	// Wide spans keep only the decades.
	s = fitScale(axis{Log: true}, []float64{0.01, 500})
	for _, v := range s.ticks {
		if d := math.Log10(v); math.Abs(d-math.Round(d)) > 1e-9 {
			t.Errorf("tick %g is not a decade", v)
		}
	}
}

func TestExplicitTicksAndOverlap(t *testing.T) {
	c := chart{ID: "t", Title: "t", X: nAxis("N", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}),
		Y:      axis{Label: "y", FromZero: true, Fmt: axisPlain},
		Series: []series{{Name: "s", Color: "#000", Points: []point{{X: 1, Y: 1}, {X: 16, Y: 2}}}}}
	svg := string(c.SVG())
	// On a log axis 15 and 16 sit a few pixels apart: the later label is dropped.
	if strings.Contains(svg, `text-anchor="middle">15</text>`) && strings.Contains(svg, `text-anchor="middle">16</text>`) {
		t.Error("overlapping x tick labels were both drawn")
	}
	if !strings.Contains(svg, `text-anchor="middle">1</text>`) {
		t.Error("first tick label missing")
	}
}

func TestEmptyChart(t *testing.T) {
	c := chart{ID: "e", Title: "e", X: nAxis("N", nil), Y: axis{Label: "y"}, Empty: "nothing here"}
	if svg := string(c.SVG()); !strings.Contains(svg, "nothing here") {
		t.Error("empty chart has no message")
	}
	if c.LegendHTML() != "" {
		t.Error("empty chart has a legend")
	}
}

func TestLabelsAvoidLines(t *testing.T) {
	// A line hugging the right end of a threshold: its label must move.
	c := chart{ID: "l", Title: "l", X: nAxis("N", []float64{1, 32}), Y: axis{Label: "y", FromZero: true, Fmt: axisPlain},
		Series: []series{{Name: "s", Color: "#000", Points: []point{{X: 1, Y: 5}, {X: 16, Y: 12}, {X: 32, Y: 21}}}},
		Refs:   []refLine{{Value: 20, Label: "20 ms instant", Color: "#080"}}}
	svg := string(c.SVG())
	m := regexp.MustCompile(`<text class="ref-label" x="([0-9.]+)" y="[0-9.]+" text-anchor="(\w+)"`).FindStringSubmatch(svg)
	if m == nil {
		t.Fatal("no reference label")
	}
	if m[2] == "end" {
		t.Errorf("label kept its default spot at the right end, across the line: %s", m[0])
	}
}

func TestNoFloatNoiseInHTML(t *testing.T) {
	html := renderHTML(t, Sample())
	if m := regexp.MustCompile(`>[^<]*\d\.\d{7,}[^<]*<`).FindString(html); m != "" {
		t.Errorf("unrounded number in the page: %s", m)
	}
}

func TestNColor(t *testing.T) {
	if a, b := nColor(0, 6), nColor(5, 6); a == b || !strings.HasPrefix(a, "#") || len(b) != 7 {
		t.Errorf("nColor = %s, %s", a, b)
	}
	if nColor(0, 1) == "" {
		t.Error("single level has no colour")
	}
}
