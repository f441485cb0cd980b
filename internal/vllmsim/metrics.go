package vllmsim

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Buckets (seconds or tokens), close to vLLM's but finer for short inter-token latencies.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	itlBuckets  = []float64{0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	reqBuckets  = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
)

// Finish reasons labelled on vllm:request_success_total.
var finishedReasons = []string{"stop", "length", FinishAbort}

// gauges are the engine's live values, written by the engine under Engine.mu and read by scrapes.
type gauges struct {
	running atomic.Int64
	waiting atomic.Int64
	kvHeld  atomic.Int64 // KV blocks held by running requests
}

type metrics struct {
	reg *prometheus.Registry

	promptTokens  prometheus.Counter
	promptCached  prometheus.Counter
	promptSource  *prometheus.CounterVec // vllm:prompt_tokens_by_source_total
	genTokens     prometheus.Counter
	preemptions   prometheus.Counter
	prefixQueries prometheus.Counter
	prefixHits    prometheus.Counter
	success       *prometheus.CounterVec
	// Speculative decoding, exported only with TokensPerStep > 1 (MTP):
	// every decode step of a request drafts TokensPerStep-1 tokens, and
	// those it emitted beyond the first count as accepted.
	specDrafts, specDraftTokens, specAccepted prometheus.Counter

	ttft       prometheus.Histogram
	itl        prometheus.Histogram
	e2e        prometheus.Histogram
	queue      prometheus.Histogram
	prefill    prometheus.Histogram
	decode     prometheus.Histogram
	reqPrompt  prometheus.Histogram
	reqGen     prometheus.Histogram
	kvCapacity float64
}

func tokenBuckets(maxLen int) []float64 {
	var b []float64
	for m := 1; ; m *= 10 {
		for _, f := range []int{1, 2, 5} {
			if f*m >= maxLen {
				return append(b, float64(maxLen))
			}
			b = append(b, float64(f*m))
		}
	}
}

func newMetrics(cfg Config, g *gauges) *metrics {
	labels := prometheus.Labels{"model_name": cfg.ModelName, "engine": "0"}
	m := &metrics{reg: prometheus.NewRegistry(), kvCapacity: float64(blocksFor(cfg.KVCacheTokens))}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		m.reg.MustRegister(c)
		return c
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, ConstLabels: labels, Buckets: buckets})
		m.reg.MustRegister(h)
		return h
	}
	gauge := func(name, help string, f func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f))
	}

	kvName, itlName := "vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds"
	if cfg.LegacyMetricNames {
		kvName, itlName = "vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds"
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
		func() float64 { return float64(g.running.Load()) })
	gauge(kvName, "KV-cache usage. 1 means 100 percent usage.",
		func() float64 { return float64(g.kvHeld.Load()) / m.kvCapacity })

	// num_requests_waiting and its split by reason, as vLLM exports them:
	// every request the simulator queues waits for capacity (it has no LoRA
	// budget or KV transfer to defer one for), so deferred stays 0. One
	// collector reads the queue once per scrape, so the split sums to
	// num_requests_waiting in every exposition, as vLLM's does.
	m.reg.MustRegister(newWaitingCollector(labels, g))
	// The simulator never sleeps: awake is 1, the sleep levels 0.
	sleep := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vllm:engine_sleep_state", Help: "Engine sleep state; awake = 0 means engine is sleeping; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.", ConstLabels: labels,
	}, []string{"sleep_state"})
	sleep.WithLabelValues("awake").Set(1)
	sleep.WithLabelValues("weights_offloaded").Set(0)
	sleep.WithLabelValues("discard_all").Set(0)
	m.reg.MustRegister(sleep)

	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vllm:cache_config_info", Help: "Information of the LLMEngine CacheConfig.",
		ConstLabels: prometheus.Labels{
			"engine":                "0",
			"block_size":            strconv.Itoa(BlockSize),
			"enable_prefix_caching": pyBool(cfg.EnablePrefixCaching),
			"num_gpu_blocks":        strconv.Itoa(blocksFor(cfg.KVCacheTokens)),
		},
	})
	info.Set(1)
	m.reg.MustRegister(info)

	m.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	m.promptCached = counter("vllm:prompt_tokens_cached_total", "Number of cached prompt tokens (local + external).")
	m.promptSource = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vllm:prompt_tokens_by_source_total", Help: "Number of prompt tokens by source.", ConstLabels: labels,
	}, []string{"source"})
	m.reg.MustRegister(m.promptSource)
	for _, src := range []string{"local_compute", "local_cache_hit", "external_kv_transfer"} {
		m.promptSource.WithLabelValues(src)
	}
	m.genTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	m.preemptions = counter("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.")
	m.prefixQueries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
	m.prefixHits = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	if cfg.TokensPerStep > 1 {
		m.specDrafts = counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.")
		m.specDraftTokens = counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.")
		m.specAccepted = counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.")
	}
	m.success = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vllm:request_success_total", Help: "Count of successfully processed requests.", ConstLabels: labels,
	}, []string{"finished_reason"})
	m.reg.MustRegister(m.success)
	for _, r := range finishedReasons {
		m.success.WithLabelValues(r)
	}

	m.ttft = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	m.itl = hist(itlName, "Histogram of inter-token latency in seconds (one sample per engine output).", itlBuckets)
	m.e2e = hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", reqBuckets)
	m.queue = hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", reqBuckets)
	m.prefill = hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", reqBuckets)
	m.decode = hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", reqBuckets)
	m.reqPrompt = hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokenBuckets(cfg.MaxModelLen))
	m.reqGen = hist("vllm:request_generation_tokens", "Number of generation tokens processed.", tokenBuckets(cfg.MaxModelLen))
	return m
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// waitingCollector exports vllm:num_requests_waiting and
// vllm:num_requests_waiting_by_reason from one read of the queue length.
type waitingCollector struct {
	g                *gauges
	waiting, reasons *prometheus.Desc
}

func newWaitingCollector(labels prometheus.Labels, g *gauges) *waitingCollector {
	return &waitingCollector{
		g:       g,
		waiting: prometheus.NewDesc("vllm:num_requests_waiting", "Number of requests waiting to be processed.", nil, labels),
		reasons: prometheus.NewDesc("vllm:num_requests_waiting_by_reason", "Number of requests waiting to be processed, by reason.", []string{"reason"}, labels),
	}
}

func (c *waitingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.waiting; ch <- c.reasons }

func (c *waitingCollector) Collect(ch chan<- prometheus.Metric) {
	n := float64(c.g.waiting.Load())
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, n)
	ch <- prometheus.MustNewConstMetric(c.reasons, prometheus.GaugeValue, n, "capacity")
	ch <- prometheus.MustNewConstMetric(c.reasons, prometheus.GaugeValue, 0, "deferred")
}
