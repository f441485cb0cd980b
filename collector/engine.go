package collector

import (
	"sort"

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

	// What explains a slow tail (docs/live-signals.md lists each source).
	waitingByReason, preemptions, promptBySource, cacheByTier                    *prometheus.Desc
	phase, ttft, itl, sleeping, admissionRejections, kvTransfer, kvTransferFails *prometheus.Desc
	specDraft, specAccepted, specAcceptance, slots                               *prometheus.Desc
}

// NewEngineCollector returns the collector for the pool's targets.
func NewEngineCollector(pool *engine.Pool) *EngineCollector {
	t := []string{"target"}
	return &EngineCollector{
		pool: pool,
		up: prometheus.NewDesc("slaprobe_engine_up",
			"Whether the last scrape of the engine's own /metrics succeeded and held vLLM, SGLang or llama.cpp server metrics (1) or not (0).", t, nil),
		errors: prometheus.NewDesc("slaprobe_engine_scrape_errors_total",
			"Failed scrapes of the engine's own /metrics.", t, nil),
		running: prometheus.NewDesc("slaprobe_engine_requests_running",
			"Requests the engine is running (vllm:num_requests_running, sglang:num_running_reqs, llamacpp:requests_processing), summed over engines.", t, nil),
		waiting: prometheus.NewDesc("slaprobe_engine_requests_waiting",
			"Requests waiting in the engine's queue (vllm:num_requests_waiting, sglang:num_queue_reqs, llamacpp:requests_deferred), summed over engines.", t, nil),
		kvCache: prometheus.NewDesc("slaprobe_engine_kv_cache_usage_ratio",
			"KV-cache usage, 0 to 1 (vllm:kv_cache_usage_perc or the older gpu_cache_usage_perc, sglang:token_usage), averaged over engines.", t, nil),
		genTokens: prometheus.NewDesc("slaprobe_engine_generation_tokens_total",
			"Output tokens the engine generated (vllm:generation_tokens_total, sglang:generation_tokens_total), as last read.", t, nil),
		promptTokens: prometheus.NewDesc("slaprobe_engine_prompt_tokens_total",
			"Prompt tokens the engine processed (vllm:prompt_tokens_total, sglang:prompt_tokens_total), as last read.", t, nil),
		lastScrape: prometheus.NewDesc("slaprobe_engine_last_scrape_timestamp_seconds",
			"Unix time of the last successful scrape of the engine's /metrics.", t, nil),
		waitingByReason: prometheus.NewDesc("slaprobe_engine_requests_waiting_by_reason",
			"Requests waiting in the engine's queue by why they wait: capacity (for a batch slot or KV cache) or deferred (LoRA budget, KV transfer, blocked), from vllm:num_requests_waiting_by_reason; only where the engine splits them.", tr("reason"), nil),
		preemptions: prometheus.NewDesc("slaprobe_engine_preemptions_total",
			"Requests preempted (vllm:num_preemptions_total) or retracted (sglang:num_retracted_requests_total; absent before the first retraction, read as 0) for want of KV cache, as last read.", t, nil),
		promptBySource: prometheus.NewDesc("slaprobe_engine_prompt_tokens_by_source_total",
			"Prompt tokens by where their KV came from: computed, cache_hit (prefix cache) or kv_transfer (from another instance), as last read; see docs/live-signals.md for each engine's source.", tr("source"), nil),
		cacheByTier: prometheus.NewDesc("slaprobe_engine_cache_tokens_by_tier_total",
			"Cached prompt tokens by the cache tier they came from (sglang:cached_tokens_total by cache_source: device, host, storage), as last read.", tr("tier"), nil),
		phase: prometheus.NewDesc("slaprobe_engine_request_phase_seconds",
			"The engine's own histogram of time its requests spent in each phase (queue, prefill, decode), all traffic, in the engine's buckets, as last read.", tr("phase"), nil),
		ttft: prometheus.NewDesc("slaprobe_engine_ttft_seconds",
			"The engine's own time-to-first-token histogram (vllm:, sglang:time_to_first_token_seconds), all traffic, in the engine's buckets, as last read.", t, nil),
		// Not slaprobe_engine_itl_seconds: that name is the engine's mean ITL
		// of each probe (engine_timing.go), with other labels.
		itl: prometheus.NewDesc("slaprobe_engine_inter_token_latency_seconds",
			"The engine's own inter-token latency histogram (vllm:, sglang:inter_token_latency_seconds), all traffic, in the engine's buckets, as last read.", t, nil),
		sleeping: prometheus.NewDesc("slaprobe_engine_sleeping",
			"1 while the engine reports it is asleep (vllm:engine_sleep_state{sleep_state=\"awake\"} is 0 on any engine), else 0.", t, nil),
		admissionRejections: prometheus.NewDesc("slaprobe_engine_admission_rejections_total",
			"Requests the engine refused at admission, all reasons (vllm:admission_rejections_total, where exported), as last read.", t, nil),
		kvTransfer: prometheus.NewDesc("slaprobe_engine_kv_transfer_seconds",
			"The engine's own histogram of KV-cache transfer time in disaggregated prefill (vllm:nixl_xfer_time_seconds), as last read.", t, nil),
		kvTransferFails: prometheus.NewDesc("slaprobe_engine_kv_transfer_failures_total",
			"Failed KV-cache transfers in disaggregated prefill (vllm:nixl_num_failed_transfers_total), as last read.", t, nil),
		specDraft: prometheus.NewDesc("slaprobe_engine_spec_decode_draft_tokens_total",
			"Speculative draft tokens proposed (vllm:, llamacpp:spec_decode_num_draft_tokens_total), as last read.", t, nil),
		specAccepted: prometheus.NewDesc("slaprobe_engine_spec_decode_accepted_tokens_total",
			"Speculative draft tokens accepted (vllm:, llamacpp:spec_decode_num_accepted_tokens_total), as last read.", t, nil),
		specAcceptance: prometheus.NewDesc("slaprobe_engine_spec_decode_acceptance_ratio",
			"The engine's speculative acceptance, accepted over draft tokens (sglang:spec_accept_rate), averaged over engines.", t, nil),
		slots: prometheus.NewDesc("slaprobe_engine_slots",
			"Requests the server can run at once (llama.cpp server's /props total_slots, read once when its metrics are first found).", t, nil),
	}
}

func tr(label string) []string { return []string{"target", label} }

// Describe implements prometheus.Collector.
func (c *EngineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.errors, c.running, c.waiting, c.kvCache, c.genTokens, c.promptTokens, c.lastScrape,
		c.waitingByReason, c.preemptions, c.promptBySource, c.cacheByTier, c.phase, c.ttft, c.itl, c.sleeping,
		c.admissionRejections, c.kvTransfer, c.kvTransferFails, c.specDraft, c.specAccepted, c.specAcceptance, c.slots} {
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
		c.collectTail(ch, t, s)
		if st.HasProps {
			ch <- prometheus.MustNewConstMetric(c.slots, prometheus.GaugeValue, float64(st.Props.TotalSlots), t)
		}
	}
}

// collectTail exports the signals that explain a slow tail, each only where
// the engine gives it.
func (c *EngineCollector) collectTail(ch chan<- prometheus.Metric, t string, s engine.Snapshot) {
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{t}, lv...)...)
	}
	counter := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{t}, lv...)...)
	}
	hist := func(d *prometheus.Desc, h *engine.Histogram, lv ...string) {
		if h == nil {
			return
		}
		ch <- prometheus.MustNewConstHistogram(d, h.Count, h.Sum, h.Buckets, append([]string{t}, lv...)...)
	}
	if s.HasWaitingByReason {
		gauge(c.waitingByReason, s.WaitingCapacity, "capacity")
		gauge(c.waitingByReason, s.WaitingDeferred, "deferred")
	}
	if s.HasPreemptions {
		counter(c.preemptions, s.Preemptions)
	}
	if s.HasPromptBySource {
		counter(c.promptBySource, s.PromptComputed, engine.SourceComputed)
		counter(c.promptBySource, s.PromptCacheHit, engine.SourceCacheHit)
		if s.HasPromptKVTransfer {
			counter(c.promptBySource, s.PromptKVTransfer, engine.SourceKVTransfer)
		}
	}
	tiers := make([]string, 0, len(s.CacheTokensByTier))
	for tier := range s.CacheTokensByTier {
		tiers = append(tiers, tier)
	}
	sort.Strings(tiers)
	for _, tier := range tiers {
		counter(c.cacheByTier, s.CacheTokensByTier[tier], tier)
	}
	if s.HasSleepState {
		v := 0.0
		if s.Sleeping {
			v = 1
		}
		gauge(c.sleeping, v)
	}
	if s.HasAdmissionRejections {
		counter(c.admissionRejections, s.AdmissionRejections)
	}
	if s.HasKVTransferFailures {
		counter(c.kvTransferFails, s.KVTransferFailures)
	}
	if s.HasSpecDecode {
		counter(c.specDraft, s.SpecDraftTokens)
		counter(c.specAccepted, s.SpecAcceptedTokens)
	}
	if s.HasSpecAcceptRate {
		gauge(c.specAcceptance, s.SpecAcceptRate)
	}
	if h := s.Hists; h != nil {
		for _, p := range engine.Phases {
			if x, ok := h.Phase[p]; ok {
				hist(c.phase, &x, p)
			}
		}
		hist(c.ttft, h.TTFT)
		hist(c.itl, h.ITL)
		hist(c.kvTransfer, h.KVTransfer)
	}
}
