package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/internal/workload"
)

// LiveMixMetrics export each target's live length mix (workload.Live):
// the share of the engine's finished requests in the window per
// prompt-length class, so that dashboards draw the traffic beside the
// classes probed. length_class has five values (workload.Classes) and
// target the configured targets: bounded.
type LiveMixMetrics struct {
	// mixes returns the current mix of each configured target that has one.
	mixes func() map[string]workload.LiveMix
}

var (
	liveMixShareDesc = prometheus.NewDesc(namespace+"_live_mix_class_ratio",
		"Share of the requests the target's engine finished in the live-mix window whose prompt falls in each length class (from the engine's prompt-length histogram).",
		[]string{"target", "length_class"}, nil)
	liveMixRequestsDesc = prometheus.NewDesc(namespace+"_live_mix_requests",
		"Requests the target's engine finished in the live-mix window (the requests the class shares count).",
		[]string{"target"}, nil)
	liveMixWindowDesc = prometheus.NewDesc(namespace+"_live_mix_window_seconds",
		"Time the target's live mix covers.", []string{"target"}, nil)
)

// NewLiveMixMetrics returns the collector.
func NewLiveMixMetrics(mixes func() map[string]workload.LiveMix) *LiveMixMetrics {
	return &LiveMixMetrics{mixes: mixes}
}

// Describe implements prometheus.Collector.
func (m *LiveMixMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- liveMixShareDesc
	ch <- liveMixRequestsDesc
	ch <- liveMixWindowDesc
}

// Collect implements prometheus.Collector: a target whose window holds no
// request exports its request count only.
func (m *LiveMixMetrics) Collect(ch chan<- prometheus.Metric) {
	for target, mix := range m.mixes() {
		ch <- prometheus.MustNewConstMetric(liveMixRequestsDesc, prometheus.GaugeValue, mix.Requests, target)
		if mix.Requests == 0 {
			continue
		}
		ch <- prometheus.MustNewConstMetric(liveMixWindowDesc, prometheus.GaugeValue, mix.Window.Seconds(), target)
		for i, s := range workload.ClassShares(mix.Prompt) {
			ch <- prometheus.MustNewConstMetric(liveMixShareDesc, prometheus.GaugeValue, s, target, workload.Classes[i].Name)
		}
	}
}
