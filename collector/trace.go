package collector

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/internal/slo"
	"github.com/slaprobe/slaprobe/internal/workload"
	"github.com/slaprobe/slaprobe/prober"
)

// TraceMetrics are the metrics of trace-shaped scenarios (a scenario with
// workload:, docs/workloads.md), per prompt-length class: a trace's lengths
// span three orders of magnitude, so its TTFT is judged against the
// threshold of each probe's class. length_class has five values
// (workload.Classes), so the series stay bounded. A scenario without a
// trace adds no series here.
type TraceMetrics struct {
	ttft   *prometheus.HistogramVec
	probes *prometheus.CounterVec
	// scenarios lists the scenarios of the current config (the shapes'
	// thresholds, draw counts and trace summaries are read at scrape).
	scenarios func() []prober.Scenario

	mu     sync.Mutex
	shapes map[string]*workload.Shape // by scenario name, as last probed
}

var (
	traceThresholdDesc = prometheus.NewDesc(namespace+"_trace_ttft_threshold_seconds",
		"TTFT threshold of each prompt-length class of a trace-shaped scenario.", []string{"scenario", "length_class"}, nil)
	traceDrawsDesc = prometheus.NewDesc(namespace+"_trace_draws_total",
		"Requests drawn from a trace-shaped scenario's trace since its config was loaded, by what became of them: "+
			"sent, clipped (prompt cut to the context; also counted as sent), output_raised (a 1-token answer sent as 2; also sent), "+
			"skipped_long, skipped_short, skipped_failed.", []string{"scenario", "outcome"}, nil)
	traceSharedDesc = prometheus.NewDesc(namespace+"_trace_shared_prefix_ratio",
		"Share of a trace's prompt tokens in blocks an earlier request of the trace had (what an unbounded prefix cache would serve).",
		[]string{"scenario"}, nil)
)

// NewTraceMetrics returns the collector; scenarios returns the scenarios the
// current config knows.
func NewTraceMetrics(scenarios func() []prober.Scenario) *TraceMetrics {
	return &TraceMetrics{
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "trace_ttft_seconds",
			Help:    "Time to first token of probes drawn from a trace, by prompt-length class (1k, 4k, 16k, 32k, 96k).",
			Buckets: slo.TTFTBuckets, NativeHistogramBucketFactor: 1.1,
		}, []string{"target", "scenario", "length_class"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "trace_probes_total",
			Help: "Probes drawn from a trace, by prompt-length class and result: good (answered, TTFT within the class's threshold), slow (answered, TTFT over it), error.",
		}, []string{"target", "scenario", "length_class", "result"}),
		scenarios: scenarios,
		shapes:    map[string]*workload.Shape{},
	}
}

// BeforeProbe remembers the shape of a trace-shaped scenario: prober.ProbeHook.
func (m *TraceMetrics) BeforeProbe(_ context.Context, _ prober.Target, s prober.Scenario) {
	if sh, ok := s.Shape.(*workload.Shape); ok {
		m.mu.Lock()
		m.shapes[s.Name] = sh
		m.mu.Unlock()
	}
}

// AfterProbe records a trace-shaped probe: prober.ProbeHook.
func (m *TraceMetrics) AfterProbe(res *prober.Result) {
	if res.LengthClass == "" {
		return
	}
	m.mu.Lock()
	sh := m.shapes[res.Scenario]
	m.mu.Unlock()
	result := "error"
	if res.Kind != prober.KindError && !res.FirstToken.IsZero() {
		ttft := res.TTFT()
		m.ttft.WithLabelValues(res.Target, res.Scenario, res.LengthClass).Observe(ttft.Seconds())
		result = "good"
		if sh != nil && !sh.TTFT().Met(res.LengthClass, ttft) {
			result = "slow"
		}
	}
	m.probes.WithLabelValues(res.Target, res.Scenario, res.LengthClass, result).Inc()
}

// Describe implements prometheus.Collector.
func (m *TraceMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.ttft.Describe(ch)
	m.probes.Describe(ch)
	ch <- traceThresholdDesc
	ch <- traceDrawsDesc
	ch <- traceSharedDesc
}

// Collect implements prometheus.Collector.
func (m *TraceMetrics) Collect(ch chan<- prometheus.Metric) {
	m.ttft.Collect(ch)
	m.probes.Collect(ch)
	if m.scenarios == nil {
		return
	}
	for _, s := range m.scenarios() {
		sh, ok := s.Shape.(*workload.Shape)
		if !ok {
			continue
		}
		for _, c := range workload.Classes {
			if d, ok := sh.TTFT()[c.Name]; ok {
				ch <- prometheus.MustNewConstMetric(traceThresholdDesc, prometheus.GaugeValue, d.Seconds(), s.Name, c.Name)
			}
		}
		n := sh.Counts()
		for _, o := range []struct {
			name string
			v    int
		}{{"sent", n.Drawn}, {"clipped", n.Clipped}, {"output_raised", n.OutputRaised},
			{"skipped_long", n.SkippedLong}, {"skipped_short", n.SkippedShort}, {"skipped_failed", n.SkippedFailed}} {
			ch <- prometheus.MustNewConstMetric(traceDrawsDesc, prometheus.CounterValue, float64(o.v), s.Name, o.name)
		}
		if sum := sh.Summary(); sum.HashIDs {
			ch <- prometheus.MustNewConstMetric(traceSharedDesc, prometheus.GaugeValue, sum.SharedShare, s.Name)
		}
	}
}
