package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/prober"
)

// warmMetrics are the series of warm-context scenarios: whether the
// server's prefix cache served a follow-up turn, and what it saved. They
// exist only for scenarios that run warm probes (created at their first
// follow-up), so cold scenarios add no series.
type warmMetrics struct {
	hitRatio, saved, savedRatio, primeTTFT *prometheus.GaugeVec
	followUps, misses                      *prometheus.CounterVec
}

func newWarmMetrics() warmMetrics {
	return warmMetrics{
		hitRatio: newGauge("warm_cache_hit_ratio",
			"Share of the last warm follow-up's prompt the server served from its prefix cache (cached_tokens / prompt_tokens). Absent when the server does not report cached tokens."),
		saved: newGauge("warm_ttft_saved_seconds",
			"TTFT the last warm follow-up saved against its conversation's priming turn, a cold prompt of the context: priming TTFT minus follow-up TTFT (negative when the follow-up was slower)."),
		savedRatio: newGauge("warm_ttft_saved_ratio",
			"slaprobe_warm_ttft_saved_seconds divided by the priming turn's TTFT: near 1 when prefix caching works, 0 or below when a follow-up costs what a cold prompt costs."),
		primeTTFT: newGauge("warm_prime_ttft_seconds",
			"TTFT of the last priming turn of a warm scenario: a cold prompt of the conversation's context, sent with a fresh cache_salt."),
		followUps: newCounter("warm_followups_total",
			"Successful warm follow-up turns."),
		misses: newCounter("warm_cache_misses_total",
			"Successful warm follow-up turns whose prompt the server reported as not cached at all (cached_tokens 0): a result, not an error."),
	}
}

func (w warmMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.hitRatio, w.saved, w.savedRatio, w.primeTTFT, w.followUps, w.misses}
}

// observePrime records a successful priming turn.
func (w warmMetrics) observePrime(r *prober.Result) {
	if d := r.TTFT(); d > 0 {
		w.primeTTFT.WithLabelValues(r.Target, r.Model, r.Scenario, apiOf(r)).Set(d.Seconds())
	}
}

// observeFollowUp records a successful follow-up turn.
func (w warmMetrics) observeFollowUp(r *prober.Result) {
	lv := []string{r.Target, r.Model, r.Scenario, apiOf(r)}
	misses := w.misses.WithLabelValues(lv...) // created with the first follow-up, so rate() sees every miss after it
	w.followUps.WithLabelValues(lv...).Inc()
	if share, ok := r.CachedShare(); ok {
		w.hitRatio.WithLabelValues(lv...).Set(share)
		if r.CachedTokens == 0 {
			misses.Inc()
		}
	}
	if saved, ok := r.TTFTSaved(); ok {
		w.saved.WithLabelValues(lv...).Set(saved.Seconds())
		w.savedRatio.WithLabelValues(lv...).Set(saved.Seconds() / r.PrimeTTFT.Seconds())
	}
}
