package engine

import (
	"math"
	"testing"
	"time"
)

func TestIsotonicFit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		xs, ys, ws []float64
		wantX      []float64
		wantY      []float64
	}{
		{"already monotone", []float64{0, 1, 2}, []float64{1, 2, 3}, nil, []float64{0, 1, 2}, []float64{1, 2, 3}},
		{"one violation pooled", []float64{0, 1, 2}, []float64{1, 3, 2}, nil, []float64{0, 1, 2}, []float64{1, 2.5, 2.5}},
		{"cascade", []float64{0, 1, 2, 3}, []float64{4, 3, 2, 1}, nil, []float64{0, 1, 2, 3}, []float64{2.5, 2.5, 2.5, 2.5}},
		{"unsorted input, equal x pooled", []float64{2, 0, 2, 1}, []float64{5, 1, 3, 2}, nil, []float64{0, 1, 2}, []float64{1, 2, 4}},
		{"weights", []float64{0, 1}, []float64{3, 1}, []float64{3, 1}, []float64{0, 1}, []float64{2.5, 2.5}},
		{"textbook", []float64{1, 2, 3, 4, 5, 6}, []float64{1, 3, 2, 4, 3.5, 5}, nil,
			[]float64{1, 2, 3, 4, 5, 6}, []float64{1, 2.5, 2.5, 3.75, 3.75, 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fit := IsotonicFit(tc.xs, tc.ys, tc.ws)
			if len(fit) != len(tc.wantX) {
				t.Fatalf("fit = %+v", fit)
			}
			for i, p := range fit {
				if p.X != tc.wantX[i] || math.Abs(p.Y-tc.wantY[i]) > 1e-12 {
					t.Errorf("point %d = (%v, %v), want (%v, %v)", i, p.X, p.Y, tc.wantX[i], tc.wantY[i])
				}
				if i > 0 && p.Y < fit[i-1].Y {
					t.Errorf("not monotone at %d", i)
				}
			}
		})
	}
	if IsotonicFit(nil, nil, nil) != nil || IsotonicFit([]float64{1}, nil, nil) != nil {
		t.Error("bad input should give nil")
	}
}

// The fit's value is the weighted least-squares optimum: pooled blocks keep
// the weighted mean, so the total is preserved.
func TestIsotonicFitPreservesMean(t *testing.T) {
	xs := []float64{0, 1, 1, 2, 4, 4, 8, 16}
	ys := []float64{0.3, 0.2, 0.5, 0.4, 0.9, 0.6, 2.5, 2.0}
	fit := IsotonicFit(xs, ys, nil)
	var sumFit, sumY float64
	for _, p := range fit {
		sumFit += p.Y * p.Weight
	}
	for _, y := range ys {
		sumY += y
	}
	if math.Abs(sumFit-sumY) > 1e-9 {
		t.Errorf("weighted sum of fit %v != sum of data %v", sumFit, sumY)
	}
}

func TestThresholdCrossing(t *testing.T) {
	fit := func(xy ...float64) []FitPoint {
		var out []FitPoint
		for i := 0; i < len(xy); i += 2 {
			out = append(out, FitPoint{X: xy[i], Y: xy[i+1], Weight: 1})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		fit    []FitPoint
		thr    float64
		want   float64
		wantLB bool
	}{
		{"interpolated between 4 and 8", fit(0, 0.5, 4, 2, 8, 4), 3, 6, false},
		{"exactly at a point", fit(0, 1, 4, 3, 8, 5), 3, 4, false},
		{"never crossed: lower bound", fit(0, 0.5, 16, 2), 3, 16, true},
		{"over at the shallowest depth", fit(2, 4, 8, 9), 3, 0, false},
		{"flat step", fit(0, 1, 1, 1, 2, 1, 3, 7), 3, 2 + 2.0/6, false},
		{"empty", nil, 3, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, lb := ThresholdCrossing(tc.fit, tc.thr)
			if math.Abs(got-tc.want) > 1e-9 || lb != tc.wantLB {
				t.Errorf("= (%v, %v), want (%v, %v)", got, lb, tc.want, tc.wantLB)
			}
		})
	}
}

// Noisy samples from a TTFT curve that rises with depth: the fitted crossing
// lands near the true one although single samples cross back and forth.
func TestDepthWindowMaxSafeDepth(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	w := DepthWindow{Window: Window[DepthSample]{Max: 100, MaxAge: time.Hour}}
	// True TTFT = 0.2 + 0.25*depth: crosses 3 s at depth 11.2.
	noise := []float64{0.4, -0.3, 0.2, -0.4, 0.1, 0.3, -0.2, -0.1}
	for i := 0; i < 80; i++ {
		d := float64(i % 20)
		w.Add(DepthSample{Time: t0.Add(time.Duration(i) * time.Second), Depth: d, TTFT: 0.2 + 0.25*d + noise[i%len(noise)]})
	}
	got, lb, n := w.MaxSafeDepth(3)
	if n != 80 || lb {
		t.Fatalf("n=%d lb=%v", n, lb)
	}
	if math.Abs(got-11.2) > 1.5 {
		t.Errorf("max safe depth = %.2f, want about 11.2", got)
	}
	// The window slides: Max bounds it, and old samples age out.
	for i := 0; i < 150; i++ {
		w.Add(DepthSample{Time: t0.Add(time.Duration(100+i) * time.Second), Depth: 1, TTFT: 0.5})
	}
	if w.Len() != 100 {
		t.Errorf("Len = %d, want 100", w.Len())
	}
	w.Prune(t0.Add(2 * time.Hour))
	if w.Len() != 0 {
		t.Errorf("after MaxAge: Len = %d, want 0", w.Len())
	}
}

func TestCounterIncrease(t *testing.T) {
	if got := CounterIncrease([]float64{10, 15, 20}); got != 10 {
		t.Errorf("monotone = %v", got)
	}
	if got := CounterIncrease([]float64{10, 15, 3, 8}); got != 5+3+5 {
		t.Errorf("with reset = %v", got)
	}
	if got := CounterIncrease([]float64{7}); got != 0 {
		t.Errorf("single = %v", got)
	}
}

func TestWindowRates(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	snap := func(sec int, running, waiting, gen, prompt, fin float64) Snapshot {
		return Snapshot{Time: t0.Add(time.Duration(sec) * time.Second), Running: running, Waiting: waiting, HasQueue: true,
			GenerationTokens: gen, PromptTokens: prompt, HasTokens: true, RequestsFinished: fin, HasRequestsFinished: true}
	}
	// Running 4 for 10 s then 8 for 10 s (trapezoids: 4→4, 4→8 would skew;
	// step at t=10 with a duplicate point).
	r, ok := WindowRates([]Snapshot{snap(0, 4, 0, 1000, 0, 0), snap(10, 4, 0, 1500, 8000, 2), snap(10, 8, 2, 1500, 8000, 2), snap(20, 8, 2, 2700, 16000, 4)})
	if !ok {
		t.Fatal("not ok")
	}
	if r.Span != 20*time.Second || r.GenerationTokens != 1700 || math.Abs(r.GenerationRate()-85) > 1e-9 {
		t.Errorf("rates %+v", r)
	}
	if math.Abs(r.MeanRunning-6) > 1e-9 || math.Abs(r.MeanWaiting-1) > 1e-9 || r.LastRunning != 8 {
		t.Errorf("means %+v", r)
	}
	if m, ok := r.MeanPromptTokens(); !ok || m != 4000 {
		t.Errorf("mean prompt = %v %v", m, ok)
	}
	if _, ok := WindowRates([]Snapshot{snap(0, 1, 0, 1, 1, 1)}); ok {
		t.Error("one snapshot should not give rates")
	}
}

func TestEWMA(t *testing.T) {
	t0 := time.Unix(0, 0)
	e := EWMA{Tau: time.Minute}
	if v := e.Update(t0, 1); v != 1 {
		t.Errorf("first = %v", v)
	}
	// After one time constant, 1-1/e of the step.
	v := e.Update(t0.Add(time.Minute), 0)
	if math.Abs(v-math.Exp(-1)) > 1e-12 {
		t.Errorf("after tau = %v, want %v", v, math.Exp(-1))
	}
	// Many small steps give the same answer as one big one.
	a, b := EWMA{Tau: time.Minute}, EWMA{Tau: time.Minute}
	a.Update(t0, 1)
	b.Update(t0, 1)
	for i := 1; i <= 60; i++ {
		a.Update(t0.Add(time.Duration(i)*time.Second), 0)
	}
	b.Update(t0.Add(time.Minute), 0)
	va, _, _ := a.Value()
	vb, _, _ := b.Value()
	if math.Abs(va-vb) > 1e-12 {
		t.Errorf("irregular sampling changed the average: %v vs %v", va, vb)
	}
	// Out-of-order samples are ignored.
	if got := a.Update(t0, 5); math.Abs(got-va) > 1e-12 {
		t.Errorf("out of order changed value to %v", got)
	}
}

func TestDecodeWindowSingleStream(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// step(n) = 4 ms + 1 ms × n: 200 tok/s at one request.
	line := func(ns ...float64) []DecodeSample {
		var out []DecodeSample
		for i, n := range ns {
			out = append(out, DecodeSample{Time: t0.Add(time.Duration(i) * time.Second), Running: n, ITL: 0.004 + 0.001*n})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		samples []DecodeSample
		ok      bool
		want    float64
		extrap  bool
	}{
		{"spread 2..5, extrapolated to 1", line(2, 3, 4, 5, 2, 3), true, 200, true},
		{"spread 1..4", line(1, 2, 3, 4, 1, 4), true, 200, false},
		{"too few", line(2, 3, 4, 5), false, 0, false},
		{"no spread: flat load tells nothing about n=1", line(4, 4, 4.2, 4, 4.4, 4), false, 0, false},
		{"all near one request: their mean", line(1, 1, 1.2), true, 1 / (0.004 + 0.001*(1+1+1.2)/3), false},
		{"faster under load (noise): flat", []DecodeSample{
			{t0, 2, 0.010}, {t0, 3, 0.009}, {t0, 4, 0.008}, {t0, 2, 0.010}, {t0, 3, 0.009}, {t0, 4, 0.008}}, true, 1 / 0.009, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w DecodeWindow
			for _, s := range tc.samples {
				w.Add(s)
			}
			f, ok := w.SingleStream()
			if ok != tc.ok {
				t.Fatalf("ok = %v (%+v), want %v", ok, f, tc.ok)
			}
			if ok && (math.Abs(f.TokensPerSecond-tc.want) > 1e-6*tc.want || f.Extrapolated != tc.extrap || f.Samples != len(tc.samples)) {
				t.Errorf("fit = %+v; want %.4f tok/s, extrapolated %v", f, tc.want, tc.extrap)
			}
		})
	}
	w := DecodeWindow{Window: Window[DecodeSample]{Max: 3, MaxAge: time.Minute}}
	for _, s := range line(1, 2, 3, 4, 5) {
		w.Add(s)
	}
	if w.Len() != 3 {
		t.Errorf("window holds %d samples, want 3", w.Len())
	}
	w.Prune(t0.Add(2 * time.Hour))
	if w.Len() != 0 {
		t.Errorf("window holds %d samples after MaxAge, want 0", w.Len())
	}
}
