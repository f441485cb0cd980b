package collector

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/internal/engine"
	"github.com/slaprobe/slaprobe/internal/gpu"
	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/prober"
)

// EnergyOptions configure the EnergyCollector.
type EnergyOptions struct {
	// PricePerKWh is the electricity price in dollars; pass
	// slo.DefaultPricePerKWh (0.10) for the reports' price. 0 is free.
	PricePerKWh float64
	// Window is the span of every figure (default 5 min).
	Window time.Duration
	// DevicesFor returns the GPU selectors (index or UUID) that serve a
	// target (config.PowerConfig.DevicesFor); nil, or an empty answer,
	// charges every GPU the Reader reads.
	DevicesFor func(target string) []string
	// Clock defaults to the system clock.
	Clock prober.Clock
}

// DefaultEnergyWindow is EnergyOptions.Window's default.
const DefaultEnergyWindow = 5 * time.Minute

// EnergyCollector exports, per target, energy per output token, electricity
// cost and average and peak power of the GPUs that serve it, over a sliding
// window. Energy comes from the driver's energy counters (not from summed
// power samples); tokens from the engine's generation token counter.
type EnergyCollector struct {
	r    *gpu.Reader
	pool *engine.Pool
	opts EnergyOptions

	mu      sync.Mutex
	windows map[string]*gpu.Window

	jPerToken, costHour, costMTok, avgW, peakW, price *prometheus.Desc
}

// NewEnergyCollector returns the collector and subscribes it to r's readings.
// Call gpu.Reader.Run for evenly spaced readings; without it readings are
// taken when Prometheus scrapes.
func NewEnergyCollector(r *gpu.Reader, pool *engine.Pool, opts EnergyOptions) *EnergyCollector {
	if opts.Window <= 0 {
		opts.Window = DefaultEnergyWindow
	}
	if opts.Clock == nil {
		opts.Clock = prober.SystemClock{}
	}
	t := []string{"target"}
	c := &EnergyCollector{
		r: r, pool: pool, opts: opts,
		windows: map[string]*gpu.Window{},
		jPerToken: prometheus.NewDesc("slaprobe_energy_per_output_token_joules",
			"GPU energy per output token over the energy window: energy-counter increase of the target's GPUs over the increase of the engine's generation tokens. Idle draw is included.", t, nil),
		costHour: prometheus.NewDesc("slaprobe_cost_per_hour_dollars",
			"Electricity cost per hour of the target's GPUs at their average power over the energy window.", t, nil),
		costMTok: prometheus.NewDesc("slaprobe_cost_per_million_output_tokens_dollars",
			"Electricity cost of one million output tokens at the energy per output token of the window.", t, nil),
		avgW: prometheus.NewDesc("slaprobe_power_average_watts",
			"Average total power of the target's GPUs over the energy window (energy-counter increase over time).", t, nil),
		peakW: prometheus.NewDesc("slaprobe_power_peak_watts",
			"Highest sampled total power of the target's GPUs over the energy window.", t, nil),
		price: prometheus.NewDesc("slaprobe_energy_price_per_kwh_dollars",
			"Electricity price the cost metrics use, dollars per kWh.", nil, nil),
	}
	r.OnRefresh(c.onReadings)
	return c
}

func (c *EnergyCollector) selectors(target string) []string {
	if c.opts.DevicesFor == nil {
		return nil // every GPU
	}
	return c.opts.DevicesFor(target)
}

func (c *EnergyCollector) onReadings(rs gpu.Readings) {
	watchers := c.pool.Watchers()
	c.mu.Lock()
	defer c.mu.Unlock()
	live := map[string]bool{}
	for _, w := range watchers {
		t := w.Target()
		live[t] = true
		win := c.windows[t]
		if win == nil {
			win = &gpu.Window{}
			c.windows[t] = win
		}
		win.Add(gpu.Total(rs, c.selectors(t)))
		// Keep one window more than needed so the oldest edge can be interpolated.
		win.Prune(rs.Time, 2*c.opts.Window)
	}
	for t := range c.windows {
		if !live[t] {
			delete(c.windows, t)
		}
	}
}

// Describe implements prometheus.Collector.
func (c *EnergyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.jPerToken, c.costHour, c.costMTok, c.avgW, c.peakW, c.price} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *EnergyCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.price, prometheus.GaugeValue, c.opts.PricePerKWh)
	if !c.r.Up() {
		return
	}
	c.r.Read() // refreshes the windows when the cache is older than the poll interval
	for _, f := range c.Figures() {
		t := f.Target
		ch <- prometheus.MustNewConstMetric(c.avgW, prometheus.GaugeValue, f.Power.AverageWatts, t)
		ch <- prometheus.MustNewConstMetric(c.peakW, prometheus.GaugeValue, f.Power.PeakWatts, t)
		ch <- prometheus.MustNewConstMetric(c.costHour, prometheus.GaugeValue, f.CostPerHour, t)
		if f.HasTokens {
			ch <- prometheus.MustNewConstMetric(c.jPerToken, prometheus.GaugeValue, f.JoulesPerToken, t)
			ch <- prometheus.MustNewConstMetric(c.costMTok, prometheus.GaugeValue, f.CostPerMillionTokens, t)
		}
	}
}

// EnergyFigures are one target's figures over the window.
type EnergyFigures struct {
	Target               string
	Power                gpu.PowerStats
	CostPerHour          float64
	OutputTokens         float64 // generation-token increase over TokenSpan
	TokenSpan            time.Duration
	JoulesPerToken       float64
	CostPerMillionTokens float64
	HasTokens            bool // false while no token was generated or engine metrics are missing
}

// Figures computes every target's figures now, sorted by target. Targets
// without two GPU readings in the window are left out.
func (c *EnergyCollector) Figures() []EnergyFigures {
	now := c.opts.Clock.Now()
	from := now.Add(-c.opts.Window)
	var out []EnergyFigures
	for _, w := range c.pool.Watchers() {
		c.mu.Lock()
		win := c.windows[w.Target()]
		var f EnergyFigures
		ok := false
		if win != nil {
			f, ok = c.figures(w, win, from)
		}
		c.mu.Unlock()
		if ok {
			out = append(out, f)
		}
	}
	return out
}

func (c *EnergyCollector) figures(w *engine.Watcher, win *gpu.Window, from time.Time) (EnergyFigures, bool) {
	st := win.Stats(from)
	if !st.OK() {
		return EnergyFigures{}, false
	}
	f := EnergyFigures{Target: w.Target(), Power: st, CostPerHour: slo.CostPerHour(st.AverageWatts, c.opts.PricePerKWh)}

	// Tokens: the engine snapshots inside the GPU readings' span, so the
	// energy at each end can be interpolated from the energy counters.
	var snaps []engine.Snapshot
	for _, s := range w.Window(c.opts.Window) {
		if s.HasTokens && !s.Time.Before(st.Start) && !s.Time.After(st.End) {
			snaps = append(snaps, s)
		}
	}
	if len(snaps) < 2 {
		return f, true
	}
	a, b := snaps[0], snaps[len(snaps)-1]
	toks := make([]float64, len(snaps))
	for i, s := range snaps {
		toks[i] = s.GenerationTokens
	}
	tokens := engine.CounterIncrease(toks)
	f.OutputTokens, f.TokenSpan = tokens, b.Time.Sub(a.Time)
	if tokens <= 0 || f.TokenSpan <= 0 {
		return f, true
	}
	var joules float64
	ea, okA := win.EnergyAt(a.Time)
	eb, okB := win.EnergyAt(b.Time)
	if okA && okB && eb >= ea {
		joules = eb - ea
	} else {
		joules = st.AverageWatts * f.TokenSpan.Seconds() // no energy counter: power samples
	}
	f.JoulesPerToken = joules / tokens
	f.CostPerMillionTokens = slo.CostPerMillionTokens(f.JoulesPerToken, c.opts.PricePerKWh)
	f.HasTokens = true
	return f, true
}
