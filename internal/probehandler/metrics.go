package probehandler

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/prober"
)

// metrics are the gauges of one /probe answer. They describe the single
// probe the request ran, so they are gauges, not histograms: Prometheus
// keeps the series over time (quantile_over_time, avg_over_time). The
// target is the scrape's own label (relabel __param_target to `target`).
// slaprobe_probe_success, _prompt_tokens and _output_tokens have the
// meaning they have on /metrics.
type metrics struct {
	success, duration, calibration                *prometheus.GaugeVec
	ttft, itl, decode, e2e, prefill               *prometheus.GaugeVec
	promptTokens, outputTokens, cacheHit, failure *prometheus.GaugeVec

	calSeconds float64
	calSet     bool
}

var labelNames = []string{"model", "scenario"}

func newMetrics(reg prometheus.Registerer) *metrics {
	g := func(name, help string, extra ...string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "slaprobe", Name: name, Help: help},
			append(append([]string(nil), labelNames...), extra...))
		reg.MustRegister(v)
		return v
	}
	return &metrics{
		success:      g("probe_success", "Whether the probe succeeded (1) or not (0)."),
		duration:     g("probe_duration_seconds", "How long the probe took, calibration included."),
		calibration:  g("probe_calibration_seconds", "Time spent sizing the prompt; near 0 when the calibration was cached."),
		ttft:         g("probe_ttft_seconds", "Time to first token of the probe. Successful probes with a cold prompt, or the last follow-up turn of a warm scenario."),
		itl:          g("probe_itl_seconds", "Mean inter-token latency of the probe. Successful probes only."),
		decode:       g("probe_decode_tokens_per_second", "Per-user decode speed of the probe. Successful probes only."),
		e2e:          g("probe_e2e_latency_seconds", "End-to-end latency of the probe. Successful probes with a cold prompt, or the last follow-up turn of a warm scenario."),
		prefill:      g("probe_prefill_tokens_per_second", "Prompt tokens divided by TTFT. Successful probes with a cold prompt only."),
		promptTokens: g("probe_prompt_tokens", "Prompt tokens of the probe, as the server counted them."),
		outputTokens: g("probe_output_tokens", "Output tokens of the probe, as the server counted them."),
		cacheHit:     g("probe_cache_hit", "Whether the server served part of the prompt from its prefix cache (1): TTFT is then not recorded, but for the follow-up of a warm scenario, which is meant to hit."),
		failure:      g("probe_failure", "Set to 1 with the reason the probe failed: a transport, HTTP, stream or calibration reason, or short_output.", "reason"),
	}
}

// observe records r, which took took.
func (m *metrics) observe(r *prober.Result, took time.Duration) {
	lv := []string{r.Model, r.Scenario}
	m.duration.WithLabelValues(lv...).Set(took.Seconds())
	m.moveCalibration(lv)
	ok := r.Kind == prober.KindSuccess
	m.success.WithLabelValues(lv...).Set(b2f(ok))
	if r.Kind != prober.KindError {
		m.promptTokens.WithLabelValues(lv...).Set(float64(r.PromptTokens))
		m.outputTokens.WithLabelValues(lv...).Set(float64(r.OutputTokens))
	}
	switch r.Kind {
	case prober.KindError:
		m.failure.WithLabelValues(append(lv, string(r.Reason))...).Set(1)
		return
	case prober.KindShortOutput:
		m.failure.WithLabelValues(append(lv, string(prober.KindShortOutput))...).Set(1)
		return
	}
	m.itl.WithLabelValues(lv...).Set(r.ITL().Seconds())
	m.decode.WithLabelValues(lv...).Set(r.DecodeSpeed())
	m.cacheHit.WithLabelValues(lv...).Set(b2f(r.CacheHit()))
	if r.CacheHit() && !r.FollowUp() { // a warm follow-up is meant to hit
		return
	}
	m.ttft.WithLabelValues(lv...).Set(r.TTFT().Seconds())
	m.e2e.WithLabelValues(lv...).Set(r.E2E().Seconds())
	if v := r.PrefillSpeed(); v > 0 && !r.FollowUp() {
		m.prefill.WithLabelValues(lv...).Set(v)
	}
}

// setCalibration records the calibration time, measured before the model is known for sure; it is
// kept aside and published with the probe's labels.
func (m *metrics) setCalibration(d time.Duration) { m.calSeconds, m.calSet = d.Seconds(), true }

func (m *metrics) moveCalibration(lv []string) {
	if m.calSet {
		m.calibration.WithLabelValues(lv...).Set(m.calSeconds)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
