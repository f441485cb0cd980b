package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/prober"
)

// newStampCounter is slaprobe_probe_timestamps_total{target, source}: the
// probes whose stream was read, by where their arrival stamps came from
// (prober.StampSource). Two series per target; never a label on the
// histograms, whose figures are the same whichever the source.
func newStampCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "probe_timestamps_total",
		Help: "Probes whose answer stream was read, by where the arrival times of its chunks came from: kernel (the kernel's receive timestamp of the segment, SO_TIMESTAMPING, Linux, HTTP/1.1) or user (the time the prober's reading goroutine got the bytes)."},
		[]string{"target", "source"})
}

// observeStamps counts r's stamp source, when its stream was read.
func (m *ProbeMetrics) observeStamps(r *prober.Result) {
	if r.Stamps == "" {
		return
	}
	m.stamps.WithLabelValues(r.Target, string(r.StampSource())).Inc()
}
