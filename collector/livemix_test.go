package collector

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/slaprobe/slaprobe/internal/workload"
)

// TestLiveMixMetrics: a target's live mix as class shares
// (workload.ClassShares), its request count and window; a target whose window holds no request exports its
// count only. promlint-clean.
func TestLiveMixMetrics(t *testing.T) {
	mix := workload.LiveMix{
		Prompt:   workload.Hist{Upper: []float64{500, 2048, 8192, math.Inf(1)}, Counts: []float64{6, 0, 2, 0}},
		Output:   workload.Hist{Upper: []float64{100, math.Inf(1)}, Counts: []float64{8, 0}},
		Window:   15 * time.Minute,
		Requests: 8,
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewLiveMixMetrics(func() map[string]workload.LiveMix {
		return map[string]workload.LiveMix{"a": mix, "idle": {}}
	}))
	want := `# HELP slaprobe_live_mix_class_ratio Share of the requests the target's engine finished in the live-mix window whose prompt falls in each length class (from the engine's prompt-length histogram).
# TYPE slaprobe_live_mix_class_ratio gauge
slaprobe_live_mix_class_ratio{length_class="16k",target="a"} 0
slaprobe_live_mix_class_ratio{length_class="1k",target="a"} 0.75
slaprobe_live_mix_class_ratio{length_class="32k",target="a"} 0
slaprobe_live_mix_class_ratio{length_class="4k",target="a"} 0.25
slaprobe_live_mix_class_ratio{length_class="96k",target="a"} 0
# HELP slaprobe_live_mix_requests Requests the target's engine finished in the live-mix window (the requests the class shares count).
# TYPE slaprobe_live_mix_requests gauge
slaprobe_live_mix_requests{target="a"} 8
slaprobe_live_mix_requests{target="idle"} 0
# HELP slaprobe_live_mix_window_seconds Time the target's live mix covers.
# TYPE slaprobe_live_mix_window_seconds gauge
slaprobe_live_mix_window_seconds{target="a"} 900
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
