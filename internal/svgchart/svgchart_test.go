package svgchart

import (
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestLinearTicksAreClean(t *testing.T) {
	s := fitScale(Axis{FromZero: true, Fmt: TickSeconds}, []float64{0.012, 0.303})
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
	s := fitScale(Axis{Log: true}, []float64{0.189, 72.7, 3.0})
	if s.lo != 0.1 || s.hi != 100 {
		t.Errorf("domain = [%g, %g]; want [0.1, 100]", s.lo, s.hi)
	}
	want := []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100}
	if !reflect.DeepEqual(s.ticks, want) {
		t.Errorf("ticks = %v; want %v", s.ticks, want)
	}
	// Wide spans keep only the decades.
	s = fitScale(Axis{Log: true}, []float64{0.01, 500})
	for _, v := range s.ticks {
		if d := math.Log10(v); math.Abs(d-math.Round(d)) > 1e-9 {
			t.Errorf("tick %g is not a decade", v)
		}
	}
}

// A sparkline stretches to its container's width: width 100 %, a viewBox
// that is not kept square, strokes that do not stretch, and everything
// inside the viewBox. Values past the threshold get a dot, as does the
// latest; failures are ticks.
func TestSparkline(t *testing.T) {
	s := Sparkline{Title: "TTFT <of> the last 5", Limit: 3, Lower: true, Points: []SparkPoint{
		{V: 1, OK: true}, {V: 4, OK: true}, {Failed: true}, {}, {V: 2, OK: true}}}
	svg := string(s.SVG())
	for _, want := range []string{`<svg class="spark" width="100%" height="32" viewBox="0 0 100 32" preserveAspectRatio="none"`,
		`<title>TTFT &lt;of&gt; the last 5</title>`, `class="limit"`, `class="series"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("sparkline lacks %s:\n%s", want, svg)
		}
	}
	if n, want := strings.Count(svg, `vector-effect="non-scaling-stroke"`), 5; n != want { // limit, tick, line, two dots
		t.Errorf("%d strokes keep their width; want %d:\n%s", n, want, svg)
	}
	if strings.Count(svg, `class="dot over"`) != 1 || strings.Count(svg, `class="dot"`) != 1 || strings.Count(svg, `class="fail"`) != 1 {
		t.Errorf("want one dot past the threshold, one on the latest value, one failure tick:\n%s", svg)
	}
	for _, m := range regexp.MustCompile(`(?:x1?|x2|cx)="([-0-9.]+)"|M([-0-9.]+) ([-0-9.]+)|points="([^"]*)"`).FindAllStringSubmatch(svg, -1) {
		var nums []string
		switch {
		case m[1] != "":
			nums = []string{m[1]}
		case m[2] != "":
			nums = []string{m[2]}
			if y, _ := strconv.ParseFloat(m[3], 64); y < 0 || y > SparkHeight {
				t.Errorf("dot at y=%g, outside 0..%d", y, SparkHeight)
			}
		default:
			for _, pt := range strings.Fields(m[4]) {
				xy := strings.Split(pt, ",")
				nums = append(nums, xy[0])
				if y, _ := strconv.ParseFloat(xy[1], 64); y < 0 || y > SparkHeight {
					t.Errorf("line point at y=%g, outside 0..%d", y, SparkHeight)
				}
			}
		}
		for _, n := range nums {
			if x, _ := strconv.ParseFloat(n, 64); x < 0 || x > 100 {
				t.Errorf("x=%g outside the viewBox", x)
			}
		}
	}
	// The scale runs from 0 to 5 (the top value and a quarter) over 29..3:
	// the threshold 3 at 13.4, the value 4 at 8.2.
	for _, want := range []string{`class="limit" x1="0" x2="100" y1="13.4" y2="13.4"`, `class="dot over" d="M26.5 8.2h0"`} {
		if !strings.Contains(svg, want) {
			t.Errorf("sparkline lacks %s:\n%s", want, svg)
		}
	}

	empty := string((&Sparkline{Empty: "no probe yet"}).SVG())
	if !strings.Contains(empty, ">no probe yet</text>") || strings.Contains(empty, "preserveAspectRatio") {
		t.Errorf("an empty sparkline shows its text unstretched:\n%s", empty)
	}
}
