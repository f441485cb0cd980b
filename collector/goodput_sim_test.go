package collector

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/slaprobe/slaprobe/internal/vllmsim"
	"github.com/slaprobe/slaprobe/prober"
	"github.com/slaprobe/slaprobe/test/testproc"
)

// goodputScenario is probed against the simulator's alternating faults: the simulator answers its
// 256-token prompt in about 80 ms and streams a token every 6 ms; a slow first token comes 800 ms
// late, a slow stream 60 ms a token. Thresholds are bucket bounds, so the per-metric SLO rules count
// them exactly.
var goodputScenario = prober.Scenario{
	Name: "alternating", InputTokens: 256, OutputTokens: 32, Interval: time.Second, Timeout: 20 * time.Second,
	Thresholds: prober.Thresholds{TTFT: 500 * time.Millisecond, ITL: 30 * time.Millisecond, E2E: 3 * time.Second, MinDecode: 25},
}

// goodputAlternatingSim configures the simulated engine of the goodput proof.
func goodputAlternatingSim() vllmsim.Config {
	cfg := vllmsim.DefaultConfig()
	cfg.Faults.AlternateSlowFirstToken = 800 * time.Millisecond
	cfg.Faults.AlternateSlowToken = 60 * time.Millisecond
	return cfg
}

// The proof of goodput against a truth the test controls: the simulator alternates a slow first
// token with a slow stream (one request in four each). Every metric's mean, read from the exported
// histograms, is within its threshold; a quarter of the probes miss the TTFT threshold and another
// quarter the ITL one, so half the probes are good, and slaprobe_probes_good_total says so.
func TestGoodputAlternatingFaults(t *testing.T) {
	testproc.QuietLight(t) // the slow halves are 10x and 2x the fast ones: no tight timing, but no overload either
	cfg := goodputAlternatingSim()
	sim, err := vllmsim.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	t.Cleanup(sim.Close)
	target := prober.Target{Name: "sim", BaseURL: srv.URL, API: prober.APIChat}
	s := goodputScenario

	reg, m := newTestMetrics(t)
	m.SetThresholds([]prober.Scenario{s})
	m.SetScenarioEnabled("sim", cfg.ModelName, s.Name, "chat", true)
	p := prober.New(nil, nil)
	const n = 20
	for i := range n {
		res := p.Probe(context.Background(), target, cfg.ModelName, s)
		if res.Kind != prober.KindSuccess {
			t.Fatalf("probe %d: %s %s %v", i, res.Kind, res.Reason, res.Err)
		}
		m.Observe(&res)
		t.Logf("probe %2d: TTFT %6.1f ms, ITL %5.1f ms, decode %6.1f tokens/s, E2E %6.1f ms, good %v", i,
			ms(res.TTFT()), ms(res.ITL()), res.DecodeSpeed(), ms(res.E2E()), s.Thresholds.MetBy(&res))
	}

	lv := []string{"sim", cfg.ModelName, s.Name, "chat"}
	total := testutil.ToFloat64(m.probes.WithLabelValues(append(lv, "success")...))
	good := testutil.ToFloat64(m.good.WithLabelValues(append(lv, "success")...))
	share := good / total
	means := histogramMeans(t, reg)
	th := s.Thresholds
	t.Logf("means: TTFT %.1f ms (threshold %v), ITL %.1f ms (%v), E2E %.1f ms (%v), decode %.1f tokens/s (minimum %v)",
		1000*means["slaprobe_ttft_seconds"], th.TTFT, 1000*means["slaprobe_itl_seconds"], th.ITL,
		1000*means["slaprobe_e2e_latency_seconds"], th.E2E, means["slaprobe_decode_tokens_per_second"], th.MinDecode)
	t.Logf("goodput: %v of %v probes good (%.0f %%)", good, total, 100*share)

	if total != n {
		t.Fatalf("probes_total = %v, want %d", total, n)
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"TTFT", means["slaprobe_ttft_seconds"] <= th.TTFT.Seconds()},
		{"ITL", means["slaprobe_itl_seconds"] <= th.ITL.Seconds()},
		{"E2E", means["slaprobe_e2e_latency_seconds"] <= th.E2E.Seconds()},
		{"decode speed", means["slaprobe_decode_tokens_per_second"] >= th.MinDecode},
	} {
		if !c.ok {
			t.Errorf("mean %s is outside its threshold: the fault is not the case goodput is for", c.name)
		}
	}
	if share < 0.45 || share > 0.55 {
		t.Errorf("good share %.2f, want 0.5 (± 10 %%)", share)
	}
	// Each metric on its own: a quarter of the probes over the TTFT threshold, a quarter over ITL.
	for _, c := range []struct {
		hist  string
		bound float64
	}{{"slaprobe_ttft_seconds", th.TTFT.Seconds()}, {"slaprobe_itl_seconds", th.ITL.Seconds()}} {
		within := bucketCount(t, reg, c.hist, c.bound)
		if bad := (total - within) / total; bad < 0.2 || bad > 0.3 {
			t.Errorf("%s: %.0f %% of probes over the threshold, want 25 %%", c.hist, 100*bad)
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// histogramMeans is each probe histogram's _sum / _count.
func histogramMeans(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	eachHistogram(t, reg, func(name string, h *dto.Histogram) {
		if h.GetSampleCount() > 0 {
			out[name] = h.GetSampleSum() / float64(h.GetSampleCount())
		}
	})
	return out
}

// bucketCount is the cumulative count of histogram name's classic bucket at bound.
func bucketCount(t *testing.T, reg prometheus.Gatherer, name string, bound float64) float64 {
	t.Helper()
	got := -1.0
	eachHistogram(t, reg, func(n string, h *dto.Histogram) {
		for _, b := range h.GetBucket() {
			if n == name && b.GetUpperBound() == bound {
				got = float64(b.GetCumulativeCount())
			}
		}
	})
	if got < 0 {
		t.Fatalf("%s has no bucket at %v", name, bound)
	}
	return got
}

func eachHistogram(t *testing.T, reg prometheus.Gatherer, f func(string, *dto.Histogram)) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mm := range mf.GetMetric() {
			if h := mm.GetHistogram(); h != nil {
				f(mf.GetName(), h)
			}
		}
	}
}
