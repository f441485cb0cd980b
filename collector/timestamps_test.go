package collector

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slaprobe/slaprobe/prober"
)

// TestStampCounter: slaprobe_probe_timestamps_total counts the probes
// whose stream was read by their stamp source, and ForgetTarget drops it.
func TestStampCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewProbeMetrics(reg)
	for _, tc := range []struct {
		stamps prober.StampSource
		kind   prober.Kind
	}{
		{prober.StampKernel, prober.KindSuccess},
		{prober.StampKernel, prober.KindSuccess},
		{prober.StampUser, prober.KindSuccess},
		{"", prober.KindError}, // the stream was never read: not counted
	} {
		m.Observe(&prober.Result{Target: "a", Model: "m", Scenario: "s", API: prober.APIChat, Kind: tc.kind, Stamps: tc.stamps})
	}
	for src, want := range map[prober.StampSource]float64{prober.StampKernel: 2, prober.StampUser: 1} {
		if got := testutil.ToFloat64(m.stamps.WithLabelValues("a", string(src))); got != want {
			t.Errorf("source %s: %v probes, want %v", src, got, want)
		}
	}
	m.ForgetTarget("a")
	if n := testutil.CollectAndCount(m.stamps); n != 0 {
		t.Errorf("%d series after ForgetTarget, want 0", n)
	}
}
