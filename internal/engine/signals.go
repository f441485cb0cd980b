package engine

import (
	"math"
	"sort"
	"time"
)

// This file holds the arithmetic behind the live signals (collector/live.go
// and collector/energy.go): counter increases and rates over a window of
// snapshots, a time-based EWMA, and the monotone fit of TTFT against queue
// depth. It has no locks and no Prometheus types, so it is tested directly.

// Rates summarises a window of snapshots.
type Rates struct {
	Span time.Duration // newest minus oldest snapshot time

	GenerationTokens float64 // increase over the span (counter resets handled)
	PromptTokens     float64
	RequestsFinished float64 // increase of the e2e histogram count
	HasRequests      bool

	// Time-weighted means of the gauges over the span (trapezoids between
	// snapshots, which arrive at irregular times).
	MeanRunning, MeanWaiting float64
	// Running of the newest snapshot.
	LastRunning float64
}

// GenerationRate is output tokens per second over the span.
func (r Rates) GenerationRate() float64 {
	if r.Span <= 0 {
		return 0
	}
	return r.GenerationTokens / r.Span.Seconds()
}

// MeanPromptTokens is the mean prompt length of requests finished in the
// span, when the engine exports a finished-request count.
func (r Rates) MeanPromptTokens() (float64, bool) {
	if !r.HasRequests || r.RequestsFinished <= 0 {
		return 0, false
	}
	return r.PromptTokens / r.RequestsFinished, true
}

// WindowRates computes Rates over snaps (oldest first). ok is false when
// there are fewer than two snapshots with token counters.
func WindowRates(snaps []Snapshot) (Rates, bool) {
	var s []Snapshot
	for _, x := range snaps {
		if x.HasTokens && x.HasQueue {
			s = append(s, x)
		}
	}
	if len(s) < 2 {
		return Rates{}, false
	}
	r := Rates{Span: s[len(s)-1].Time.Sub(s[0].Time), LastRunning: s[len(s)-1].Running}
	if r.Span <= 0 {
		return Rates{}, false
	}
	gen := make([]float64, len(s))
	prompt := make([]float64, len(s))
	fin := make([]float64, len(s))
	r.HasRequests = true
	for i, x := range s {
		gen[i], prompt[i], fin[i] = x.GenerationTokens, x.PromptTokens, x.RequestsFinished
		r.HasRequests = r.HasRequests && x.HasRequestsFinished
	}
	r.GenerationTokens = CounterIncrease(gen)
	r.PromptTokens = CounterIncrease(prompt)
	if r.HasRequests {
		r.RequestsFinished = CounterIncrease(fin)
	}
	var run, wait float64
	for i := 1; i < len(s); i++ {
		dt := s[i].Time.Sub(s[i-1].Time).Seconds()
		run += dt * (s[i].Running + s[i-1].Running) / 2
		wait += dt * (s[i].Waiting + s[i-1].Waiting) / 2
	}
	r.MeanRunning = run / r.Span.Seconds()
	r.MeanWaiting = wait / r.Span.Seconds()
	return r, true
}

// CounterIncrease is the increase of a counter sampled in order, treating a
// decrease as a reset to zero (the engine restarted), as PromQL's increase does.
func CounterIncrease(v []float64) float64 {
	var inc float64
	for i := 1; i < len(v); i++ {
		if d := v[i] - v[i-1]; d >= 0 {
			inc += d
		} else {
			inc += v[i]
		}
	}
	return inc
}

// EWMA is an exponentially weighted moving average over irregular samples:
// a sample dt after the previous one weighs 1-exp(-dt/Tau), so the smoothing
// does not depend on how often samples come, and a long gap forgets the past.
type EWMA struct {
	Tau   time.Duration
	value float64
	last  time.Time
	set   bool
}

// Update folds v, observed at t, into the average and returns it.
func (e *EWMA) Update(t time.Time, v float64) float64 {
	if !e.set || e.Tau <= 0 {
		e.value, e.last, e.set = v, t, true
		return v
	}
	dt := t.Sub(e.last)
	if dt < 0 {
		return e.value // out of order: ignore
	}
	alpha := 1 - math.Exp(-dt.Seconds()/e.Tau.Seconds())
	e.value += alpha * (v - e.value)
	e.last = t
	return e.value
}

// Value returns the average and the time of its last update.
func (e *EWMA) Value() (v float64, at time.Time, ok bool) { return e.value, e.last, e.set }

// FitPoint is one point of a fitted curve: at X, the fit is Y, from Weight samples.
type FitPoint struct {
	X, Y   float64
	Weight float64
}

// IsotonicFit returns the non-decreasing least-squares fit of ys against xs
// (pool adjacent violators), one point per distinct x, sorted by x. Samples
// with equal x are pooled first. Weights default to 1 when ws is nil.
func IsotonicFit(xs, ys, ws []float64) []FitPoint {
	n := len(xs)
	if n == 0 || len(ys) != n || (ws != nil && len(ws) != n) {
		return nil
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return xs[idx[a]] < xs[idx[b]] })

	// Pool equal x into weighted means.
	type block struct {
		x0, x1 int // indexes into pts covered by the block
		w, wy  float64
	}
	var pts []FitPoint
	for _, i := range idx {
		w := 1.0
		if ws != nil {
			w = ws[i]
		}
		if w <= 0 || math.IsNaN(ys[i]) || math.IsNaN(xs[i]) {
			continue
		}
		if k := len(pts) - 1; k >= 0 && pts[k].X == xs[i] {
			pts[k].Y += w * ys[i] // holds w*y until the pass below
			pts[k].Weight += w
			continue
		}
		pts = append(pts, FitPoint{X: xs[i], Y: w * ys[i], Weight: w})
	}
	stack := make([]block, 0, len(pts))
	for i, p := range pts {
		stack = append(stack, block{x0: i, x1: i, w: p.Weight, wy: p.Y})
		for len(stack) > 1 {
			a, b := stack[len(stack)-2], stack[len(stack)-1]
			if a.wy/a.w <= b.wy/b.w {
				break
			}
			stack = stack[:len(stack)-2]
			stack = append(stack, block{x0: a.x0, x1: b.x1, w: a.w + b.w, wy: a.wy + b.wy})
		}
	}
	for _, b := range stack {
		m := b.wy / b.w
		for i := b.x0; i <= b.x1; i++ {
			pts[i].Y = m
		}
	}
	return pts
}

// ThresholdCrossing returns the largest x at which the non-decreasing fit
// stays at or under threshold, interpolating linearly between the last point
// under it and the first point over it (the reports mark such values "~").
//
// lowerBound is true when the fit never crosses the threshold: x is then the
// largest x observed, and the true limit lies beyond what was seen. When even
// the smallest observed x is over the threshold, x is 0: nothing seen was safe.
func ThresholdCrossing(fit []FitPoint, threshold float64) (x float64, lowerBound bool) {
	if len(fit) == 0 {
		return 0, false
	}
	if fit[0].Y > threshold {
		return 0, false
	}
	last := -1
	for i, p := range fit {
		if p.Y <= threshold {
			last = i
		}
	}
	if last == len(fit)-1 {
		return fit[last].X, true
	}
	a, b := fit[last], fit[last+1]
	return a.X + (threshold-a.Y)/(b.Y-a.Y)*(b.X-a.X), false
}

// DepthSample is one probe's TTFT at the queue depth it met.
type DepthSample struct {
	Time  time.Time
	Depth float64 // running + waiting when the probe was sent
	TTFT  float64 // seconds; for a probe that timed out before its first token, the timeout
}

// DepthWindow is a sliding window of DepthSamples (see Window).
type DepthWindow struct{ Window[DepthSample] }

// Fit is the isotonic fit of TTFT against depth over the window.
func (w *DepthWindow) Fit() []FitPoint {
	xs := make([]float64, len(w.samples))
	ys := make([]float64, len(w.samples))
	for i, s := range w.samples {
		xs[i], ys[i] = s.Depth, s.TTFT
	}
	return IsotonicFit(xs, ys, nil)
}

// MaxSafeDepth is where the fit crosses threshold (seconds); see
// ThresholdCrossing. n is the number of samples behind it.
func (w *DepthWindow) MaxSafeDepth(threshold float64) (depth float64, lowerBound bool, n int) {
	if len(w.samples) == 0 {
		return 0, false, 0
	}
	d, lb := ThresholdCrossing(w.Fit(), threshold)
	return d, lb, len(w.samples)
}

// Timed is a sample of a sliding window: it knows when it was taken.
type Timed interface{ At() time.Time }

// At is when the probe was sent.
func (s DepthSample) At() time.Time { return s.Time }

// At is when the probe's decode was measured.
func (s DecodeSample) At() time.Time { return s.Time }

// Window is a sliding window of samples: at most Max (0: no limit), none
// older than MaxAge (0: no limit) before the newest.
type Window[S Timed] struct {
	Max     int
	MaxAge  time.Duration
	samples []S
}

// Add appends s and drops what falls out of the window.
func (w *Window[S]) Add(s S) {
	w.samples = append(w.samples, s)
	w.Prune(s.At())
}

// Prune drops the samples older than MaxAge before now, and the oldest
// beyond Max, keeping the slice's storage.
func (w *Window[S]) Prune(now time.Time) {
	cut := 0
	if w.MaxAge > 0 {
		for cut < len(w.samples) && now.Sub(w.samples[cut].At()) > w.MaxAge {
			cut++
		}
	}
	if w.Max > 0 && len(w.samples)-cut > w.Max {
		cut = len(w.samples) - w.Max
	}
	if cut > 0 {
		w.samples = append(w.samples[:0], w.samples[cut:]...)
	}
}

// Len is the number of samples in the window.
func (w *Window[S]) Len() int { return len(w.samples) }

// DecodeSample is one probe's decode at the engine's batch size: its mean
// inter-token latency and the requests running during its decode (itself
// included).
type DecodeSample struct {
	Time    time.Time
	Running float64
	ITL     float64 // seconds per token: 1 / per-user decode speed
}

// DecodeWindow is a sliding window of DecodeSamples (see Window).
type DecodeWindow struct{ Window[DecodeSample] }

// SingleStreamFit is the per-user decode speed at one running request,
// read off a fit of decode against batch size.
type SingleStreamFit struct {
	TokensPerSecond float64
	Samples         int
	// MinRunning and MaxRunning span the batch sizes seen; Extrapolated is
	// true when no sample ran near one request (MinRunning > 1.5), so the
	// value is the fit's line carried beyond the data.
	MinRunning, MaxRunning float64
	Extrapolated           bool
}

// Minimums of a single-stream fit: enough probes, spread over enough batch
// sizes that the slope means something.
const (
	MinDecodeFitSamples = 6
	MinDecodeFitSpread  = 1.0
)

// SingleStream fits ITL = a + b × running by least squares over the window
// (a decode step of a memory-bandwidth-bound engine grows about linearly
// with the batch) and returns 1 / (a + b), the speed at one running request.
// ok is false with fewer than MinDecodeFitSamples samples or a running
// spread under MinDecodeFitSpread, unless every sample ran near one request
// (then their mean speed is the measurement). A slope below zero (faster
// with more load: noise) is taken as flat.
func (w *DecodeWindow) SingleStream() (SingleStreamFit, bool) {
	n := len(w.samples)
	f := SingleStreamFit{Samples: n, MinRunning: math.Inf(1), MaxRunning: math.Inf(-1)}
	if n == 0 {
		return f, false
	}
	var sx, sy float64
	for _, s := range w.samples {
		sx += s.Running
		sy += s.ITL
		f.MinRunning, f.MaxRunning = math.Min(f.MinRunning, s.Running), math.Max(f.MaxRunning, s.Running)
	}
	mx, my := sx/float64(n), sy/float64(n)
	if f.MaxRunning <= 1.5 && my > 0 {
		f.TokensPerSecond = 1 / my
		return f, true
	}
	if n < MinDecodeFitSamples || f.MaxRunning-f.MinRunning < MinDecodeFitSpread {
		return f, false
	}
	var sxx, sxy float64
	for _, s := range w.samples {
		sxx += (s.Running - mx) * (s.Running - mx)
		sxy += (s.Running - mx) * (s.ITL - my)
	}
	b := math.Max(0, sxy/sxx)
	a := my - b*mx
	itl1 := a + b
	if itl1 <= 0 {
		return f, false
	}
	f.TokensPerSecond = 1 / itl1
	f.Extrapolated = f.MinRunning > 1.5
	return f, true
}
