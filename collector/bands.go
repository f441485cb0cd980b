package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/internal/slo"
)

// BandCollector exports the experience bands (internal/slo's ITL, TTFT,
// decode-speed and scaling-efficiency bands) as gauges, so that every line
// a dashboard draws at a band's edge, such as the 20 ms "instant" ITL line
// and the 70 ms memory-bandwidth ceiling, is read from a series and never
// typed into the dashboard. The values are constants of this build.
type BandCollector struct {
	descs []bandDesc
}

type bandDesc struct {
	desc  *prometheus.Desc
	bands slo.Bands
}

// BandLevels are the values of the band label, best first: the series with
// band="good" holds the edge between good and acceptable. Past the last
// edge a value is poor.
var BandLevels = [3]string{"excellent", "good", "acceptable"}

// NewBandCollector returns the collector of the four experience bands.
func NewBandCollector() *BandCollector {
	d := func(name, help string, b slo.Bands) bandDesc {
		return bandDesc{prometheus.NewDesc(name, help, []string{"band"}, nil), b}
	}
	return &BandCollector{descs: []bandDesc{
		d("slaprobe_experience_band_itl_seconds",
			"Upper edge of each inter-token latency band (band: excellent, good, acceptable; beyond acceptable is poor). band=\"good\" is the 20 ms line where streaming stops feeling instant, band=\"acceptable\" the 70 ms memory-bandwidth ceiling of large MoE models.",
			slo.ITLBands),
		d("slaprobe_experience_band_ttft_seconds",
			"Upper edge of each time-to-first-token band (band: excellent, good, acceptable; beyond acceptable users retry).",
			slo.TTFTBands),
		d("slaprobe_experience_band_decode_tokens_per_second",
			"Lower edge of each per-user decode speed band (band: excellent, good, acceptable; below acceptable, slower than reading pace).",
			slo.DecodeBands),
		d("slaprobe_experience_band_scaling_efficiency_ratio",
			"Lower edge of each scaling efficiency band (band: excellent, good, acceptable; below acceptable is poor).",
			slo.EfficiencyBands),
	}}
}

// Describe implements prometheus.Collector.
func (c *BandCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d.desc
	}
}

// Collect implements prometheus.Collector.
func (c *BandCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c.descs {
		for i, level := range BandLevels {
			ch <- prometheus.MustNewConstMetric(d.desc, prometheus.GaugeValue, d.bands.Edges[i], level)
		}
	}
}
