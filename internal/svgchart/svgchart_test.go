package svgchart

import (
	"math"
	"reflect"
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
