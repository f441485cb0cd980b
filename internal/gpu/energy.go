package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// This file turns readings into energy figures: total draw of a set of GPUs,
// average and peak power over a window, and joules per output token (what
// that costs is internal/slo/cost.go's). collector/energy.go exports them
// continuously; a sweep uses PowerSampler per step.

// PowerSample is the total of a set of GPUs at one time.
type PowerSample struct {
	Time      time.Time
	GPUs      int     // devices summed
	Watts     float64 // summed power draw
	HasPower  bool    // every device reported power
	Joules    float64 // summed energy counters
	HasEnergy bool    // every device reported its energy counter
}

// Total sums the readings of the devices that match any of selectors (all
// devices when selectors is empty).
func Total(rs Readings, selectors []string) PowerSample {
	s := PowerSample{Time: rs.Time, HasPower: true, HasEnergy: true}
	for _, g := range rs.GPUs {
		if !selected(selectors, g.Device) {
			continue
		}
		s.GPUs++
		s.Watts += g.PowerWatts
		s.HasPower = s.HasPower && g.HasPower
		s.Joules += g.EnergyJoules
		s.HasEnergy = s.HasEnergy && g.HasEnergy
	}
	if s.GPUs == 0 {
		s.HasPower, s.HasEnergy = false, false
	}
	return s
}

func selected(selectors []string, d Device) bool {
	if len(selectors) == 0 {
		return true
	}
	for _, s := range selectors {
		if Matches(s, d) {
			return true
		}
	}
	return false
}

// PowerStats summarises samples over a span of time.
type PowerStats struct {
	Start, End time.Time
	Samples    int
	GPUs       int
	// AverageWatts is energy / duration. From the driver's energy counter
	// when every sample had it (exact, whatever the sampling rate), else the
	// time-weighted mean of the sampled power.
	AverageWatts float64
	// PeakWatts is the largest sampled total draw. Power is sampled, so short
	// spikes between samples are missed.
	PeakWatts         float64
	EnergyJoules      float64
	FromEnergyCounter bool
}

// Duration is End - Start.
func (p PowerStats) Duration() time.Duration { return p.End.Sub(p.Start) }

// OK reports whether the stats cover a span (two samples or more).
func (p PowerStats) OK() bool { return p.Samples >= 2 && p.End.After(p.Start) }

// JoulesPerToken divides the energy by tokens; false when tokens <= 0.
func (p PowerStats) JoulesPerToken(tokens float64) (float64, bool) {
	if tokens <= 0 || !p.OK() {
		return 0, false
	}
	return p.EnergyJoules / tokens, true
}

// Window holds PowerSamples of one set of GPUs, oldest first.
type Window struct {
	samples []PowerSample
}

// Add appends s (ignored when older than the newest sample or empty).
func (w *Window) Add(s PowerSample) {
	if s.GPUs == 0 {
		return
	}
	if n := len(w.samples); n > 0 && !s.Time.After(w.samples[n-1].Time) {
		return
	}
	w.samples = append(w.samples, s)
}

// Prune drops samples older than maxAge before now, keeping at least one
// sample at or before the horizon so the window keeps covering it.
func (w *Window) Prune(now time.Time, maxAge time.Duration) {
	horizon := now.Add(-maxAge)
	cut := 0
	for cut+1 < len(w.samples) && !w.samples[cut+1].Time.After(horizon) {
		cut++
	}
	if cut > 0 {
		w.samples = append(w.samples[:0], w.samples[cut:]...)
	}
}

// Len is the number of samples.
func (w *Window) Len() int { return len(w.samples) }

// Stats summarises the samples from `from` on (all when from is zero).
func (w *Window) Stats(from time.Time) PowerStats {
	var s []PowerSample
	for _, x := range w.samples {
		if !x.Time.Before(from) {
			s = append(s, x)
		}
	}
	return statsOf(s)
}

func statsOf(s []PowerSample) PowerStats {
	var p PowerStats
	if len(s) == 0 {
		return p
	}
	p.Start, p.End, p.Samples = s[0].Time, s[len(s)-1].Time, len(s)
	p.FromEnergyCounter = true
	for _, x := range s {
		p.GPUs = max(p.GPUs, x.GPUs)
		if x.HasPower {
			p.PeakWatts = max(p.PeakWatts, x.Watts)
		}
		p.FromEnergyCounter = p.FromEnergyCounter && x.HasEnergy
	}
	if len(s) < 2 {
		p.AverageWatts = s[0].Watts
		return p
	}
	dur := p.End.Sub(p.Start).Seconds()
	if p.FromEnergyCounter {
		for i := 1; i < len(s); i++ {
			d := s[i].Joules - s[i-1].Joules
			if d < 0 { // a decrease is a reset: the driver reloaded
				d = s[i].Joules
			}
			p.EnergyJoules += d
		}
	} else {
		for i := 1; i < len(s); i++ {
			dt := s[i].Time.Sub(s[i-1].Time).Seconds()
			p.EnergyJoules += dt * (s[i].Watts + s[i-1].Watts) / 2
		}
	}
	if dur > 0 {
		p.AverageWatts = p.EnergyJoules / dur
	}
	return p
}

// EnergyAt interpolates the energy counter at t between the samples around
// it. ok is false outside the samples or without energy counters.
func (w *Window) EnergyAt(t time.Time) (float64, bool) {
	s := w.samples
	for i := 1; i < len(s); i++ {
		a, b := s[i-1], s[i]
		if t.Before(a.Time) || t.After(b.Time) {
			continue
		}
		if !a.HasEnergy || !b.HasEnergy || b.Joules < a.Joules {
			return 0, false
		}
		f := t.Sub(a.Time).Seconds() / b.Time.Sub(a.Time).Seconds()
		return a.Joules + f*(b.Joules-a.Joules), true
	}
	if len(s) == 1 && t.Equal(s[0].Time) && s[0].HasEnergy {
		return s[0].Joules, true
	}
	return 0, false
}

// DefaultSampleInterval is the PowerSampler's default: one read a second
// during a benchmark run, when the GPUs are busy by design.
const DefaultSampleInterval = time.Second

// ErrNoPower is returned by PowerSampler.Start when there is nothing to
// sample: NVML is down or no selected GPU exists.
var ErrNoPower = errors.New("no GPU power readings (NVML unavailable or no GPU selected)")

// PowerSampler records the total draw of some GPUs over intervals (a bench
// run, a sweep step) and returns average and peak power and energy. Average
// power and energy come from the driver's energy counter, so they are exact
// whatever the interval; peak power is sampled every interval.
//
// internal/sweeper adapts it to sweep.PowerSampler, so a sweep reports
// power per step; by hand:
//
//	s := gpu.NewPowerSampler(reader, selectors, 0)
//	if err := s.Start(ctx); err == nil {
//		... run ...
//		st, err := s.Stop() // avg/peak W, J; st.JoulesPerToken(outputTokens)
//	}
type PowerSampler struct {
	r         *Reader
	selectors []string
	interval  time.Duration

	mu      sync.Mutex
	samples []PowerSample
	last    PowerStats
	cancel  context.CancelFunc
	done    chan struct{}
}

// NewPowerSampler samples the devices of r that match selectors (all when
// empty) every interval (DefaultSampleInterval when <= 0).
func NewPowerSampler(r *Reader, selectors []string, interval time.Duration) *PowerSampler {
	if interval <= 0 {
		interval = DefaultSampleInterval
	}
	return &PowerSampler{r: r, selectors: selectors, interval: interval}
}

// Start begins an interval: a first sample now, then one every interval
// until Stop. A Start while running restarts the interval.
func (p *PowerSampler) Start(ctx context.Context) error {
	p.halt()
	if !p.r.Up() {
		return ErrNoPower
	}
	p.mu.Lock()
	p.samples = nil
	p.mu.Unlock()
	if !p.sample() {
		return ErrNoPower
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	p.mu.Lock()
	p.cancel, p.done = cancel, done
	p.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.sample()
			}
		}
	}()
	return nil
}

func (p *PowerSampler) halt() bool {
	p.mu.Lock()
	cancel, done := p.cancel, p.done
	p.cancel, p.done = nil, nil
	p.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel()
	<-done
	return true
}

func (p *PowerSampler) sample() bool {
	s := Total(p.r.Refresh(), p.selectors)
	if s.GPUs == 0 {
		return false
	}
	p.mu.Lock()
	if n := len(p.samples); n == 0 || s.Time.After(p.samples[n-1].Time) {
		p.samples = append(p.samples, s)
	}
	p.mu.Unlock()
	return true
}

// Stop takes a last sample, ends the interval and returns what was drawn,
// summed over the sampled GPUs; Last returns the same until the next Stop.
func (p *PowerSampler) Stop() (PowerStats, error) {
	if !p.halt() {
		return PowerStats{}, ErrNoPower
	}
	p.sample()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.last = statsOf(p.samples)
	if !p.last.OK() {
		return PowerStats{}, fmt.Errorf("power interval too short: %d sample(s)", p.last.Samples)
	}
	return p.last, nil
}

// Last returns the stats of the interval the last Stop ended.
func (p *PowerSampler) Last() PowerStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last
}

// Samples returns a copy of the last interval's samples, for a power chart.
func (p *PowerSampler) Samples() []PowerSample {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]PowerSample(nil), p.samples...)
}
