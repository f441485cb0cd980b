package collector

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slaprobe/slaprobe/prober"
)

// TestEngineTimingImplausible: a dropped engine timing counts as source
// none, adds nothing to the split's histograms, and is counted by where it
// came from and why.
func TestEngineTimingImplausible(t *testing.T) {
	_, m := newTestMetrics(t)
	for _, d := range []prober.TimingDrop{
		{From: prober.TimingResponse, Reason: prober.ImplausibleExceedsTTFT},
		{From: prober.TimingTrace, Reason: prober.ImplausibleExceedsTTFT},
		{From: prober.TimingTrace, Reason: prober.ImplausibleExceedsTTFT},
		{From: prober.TimingResponse, Reason: prober.ImplausibleInvalid},
	} {
		r := success()
		r.Engine = prober.EngineTiming{Source: prober.TimingNone, Dropped: d}
		m.Observe(&r)
	}
	lv := []string{"a", "m", success().Scenario, "chat"}
	if got := testutil.ToFloat64(m.engine.timing.WithLabelValues(append(lv, string(prober.TimingNone))...)); got != 4 {
		t.Errorf(`slaprobe_probe_engine_timing_total{source="none"} = %v, want 4`, got)
	}
	for _, c := range []struct {
		source prober.TimingSource
		reason string
		want   float64
	}{
		{prober.TimingResponse, prober.ImplausibleExceedsTTFT, 1},
		{prober.TimingTrace, prober.ImplausibleExceedsTTFT, 2},
		{prober.TimingResponse, prober.ImplausibleInvalid, 1},
		{prober.TimingTrace, prober.ImplausibleInvalid, 0},
	} {
		if got := testutil.ToFloat64(m.engine.implausible.WithLabelValues("a", string(c.source), c.reason)); got != c.want {
			t.Errorf("slaprobe_probe_engine_timing_implausible_total{source=%q,reason=%q} = %v, want %v", c.source, c.reason, got, c.want)
		}
	}
	if n := histCount(t, m.engine.outside.WithLabelValues(lv...)); n != 0 {
		t.Errorf("slaprobe_ttft_outside_engine_seconds has %d samples from dropped timings, want 0", n)
	}
}
