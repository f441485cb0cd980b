package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/slaprobe/slaprobe/internal/engine"
)

// EngineCollector exports, per target, what slaprobe last read from the
// engine's own /metrics: whether it could read it, and the key gauges in
// base units, so dashboards join them with probe metrics on `target`
// without relabelling the engine's own series.
//
// Values come from the Watchers' last snapshots; a scrape of slaprobe never
// scrapes the engine.
type EngineCollector struct {
	pool *engine.Pool

	up, errors, running, waiting, kvCache, genTokens, promptTokens, lastScrape *prometheus.Desc
}

// NewEngineCollector returns the collector for the pool's targets.
func NewEngineCollector(pool *engine.Pool) *EngineCollector {
	t := []string{"target"}
	return &EngineCollector{
		pool: pool,
		up: prometheus.NewDesc("slaprobe_engine_up",
			"Whether the last scrape of the engine's own /metrics succeeded and held vLLM or SGLang metrics (1) or not (0).", t, nil),
		errors: prometheus.NewDesc("slaprobe_engine_scrape_errors_total",
			"Failed scrapes of the engine's own /metrics.", t, nil),
		running: prometheus.NewDesc("slaprobe_engine_requests_running",
			"Requests the engine is running (vllm:num_requests_running, sglang:num_running_reqs), summed over engines.", t, nil),
		waiting: prometheus.NewDesc("slaprobe_engine_requests_waiting",
			"Requests waiting in the engine's queue (vllm:num_requests_waiting, sglang:num_queue_reqs), summed over engines.", t, nil),
		kvCache: prometheus.NewDesc("slaprobe_engine_kv_cache_usage_ratio",
			"KV-cache usage, 0 to 1 (vllm:kv_cache_usage_perc or the older gpu_cache_usage_perc, sglang:token_usage), averaged over engines.", t, nil),
		genTokens: prometheus.NewDesc("slaprobe_engine_generation_tokens_total",
			"Output tokens the engine generated (vllm:generation_tokens_total, sglang:generation_tokens_total), as last read.", t, nil),
		promptTokens: prometheus.NewDesc("slaprobe_engine_prompt_tokens_total",
			"Prompt tokens the engine processed (vllm:prompt_tokens_total, sglang:prompt_tokens_total), as last read.", t, nil),
		lastScrape: prometheus.NewDesc("slaprobe_engine_last_scrape_timestamp_seconds",
			"Unix time of the last successful scrape of the engine's /metrics.", t, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *EngineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.errors, c.running, c.waiting, c.kvCache, c.genTokens, c.promptTokens, c.lastScrape} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *EngineCollector) Collect(ch chan<- prometheus.Metric) {
	for _, w := range c.pool.Watchers() {
		st := w.Status()
		t := st.Target
		up := 0.0
		if st.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, t)
		ch <- prometheus.MustNewConstMetric(c.errors, prometheus.CounterValue, float64(st.ScrapeErrors), t)
		// Values of the last good snapshot are shown only while the endpoint
		// is up: a stale queue length would look like a live one.
		if !st.Up || !st.HasLatest {
			continue
		}
		s := st.Latest
		if s.HasQueue {
			ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, s.Running, t)
			ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, s.Waiting, t)
		}
		if s.HasKVCache {
			ch <- prometheus.MustNewConstMetric(c.kvCache, prometheus.GaugeValue, s.KVCacheUsage, t)
		}
		if s.HasTokens {
			ch <- prometheus.MustNewConstMetric(c.genTokens, prometheus.CounterValue, s.GenerationTokens, t)
			ch <- prometheus.MustNewConstMetric(c.promptTokens, prometheus.CounterValue, s.PromptTokens, t)
		}
		ch <- prometheus.MustNewConstMetric(c.lastScrape, prometheus.GaugeValue, float64(s.Time.UnixNano())/1e9, t)
	}
}
