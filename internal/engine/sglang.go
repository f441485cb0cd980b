package engine

import (
	"math"

	dto "github.com/prometheus/client_model/go"
)

// SGLang's table. Where the names come from (docs/engines.md has the full
// table; testdata/README.md the fixtures): sgl-project/sglang
// python/sglang/srt/metrics/collector.py (commit 00ae9c1590d2) and
// test/srt/test_metrics.py (essential_metrics, commit 00a2f8074611).
// cached_tokens_total has no sample before the first cache hit;
// spec_accept_rate and spec_accept_length read 0 on an engine without
// speculative decoding.
var sglangFlavor = register(flavor{
	name: "sglang", prefix: "sglang:", precedence: 20,
	rows: []row{
		{signal: sigRunning, names: names{"sglang:num_running_reqs"}},
		{signal: sigWaiting, names: names{"sglang:num_queue_reqs"}},
		{signal: sigKVCache, names: names{"sglang:token_usage"}},
		{signal: sigGenerationTokens, names: names{"sglang:generation_tokens_total", "sglang:generation_tokens"}},
		{signal: sigPromptTokens, names: names{"sglang:prompt_tokens_total", "sglang:prompt_tokens"}}, // cached tokens included
		{signal: sigQueueTime, names: names{"sglang:queue_time_seconds"}},
		{signal: sigTTFT, names: names{"sglang:time_to_first_token_seconds"}},
		{signal: sigITL, names: names{"sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"}},
		{signal: sigRequestsFinished, names: names{"sglang:e2e_request_latency_seconds"}},
		{signal: sigCacheHitRate, names: names{"sglang:cache_hit_rate"}},

		// What explains a slow tail. The retraction counter appears only
		// after the first retraction: on a page with other sglang: families,
		// its absence means none yet.
		{signal: sigPreemptions, names: names{"sglang:num_retracted_requests_total", "sglang:num_retracted_requests"}, zeroIfAbsent: true},
		{signal: sigPrefillTime, names: sglStageLatency, where: label{"stage", "prefill_forward"}},
		{signal: sigDecodeTime, names: sglStageLatency, where: label{"stage", "decode_loop"}},
		{signal: sigSpecAcceptRate, names: names{"sglang:spec_accept_rate"}},
		{signal: sigHook, names: sglCachedTokens},
		{signal: sigHook, names: sglSpecAcceptLength},

		// The live length mix (workload: live). SGLang declares both only
		// with collect_tokens_histogram (the flag --collect-tokens-histogram):
		// TokenizerMetricsCollector in python/sglang/srt/metrics/collector.py,
		// commit 00ae9c1590d2d0bb6c0bfff39e312c34ae3dd538. Bucket bounds are
		// the flags --prompt-tokens-buckets / --generation-tokens-buckets, by
		// default 30 bounds from 100 to 1,100,000 tokens for both.
		{signal: sigPromptLength, names: names{"sglang:prompt_tokens_histogram"}},
		{signal: sigOutputLength, names: names{"sglang:generation_tokens_histogram"}},
	},
	lengths: "SGLang exports it when started with --collect-tokens-histogram",
	// Tensor-parallel ranks observe the same requests: where a tp_rank label
	// exists, rank 0 alone is read, so a request is not counted once per rank.
	histKeep: tpRank0,
	hook:     readSGLang,
})

var (
	sglStageLatency = names{"sglang:per_stage_req_latency_seconds"}
	sglCachedTokens = names{"sglang:cached_tokens_total", "sglang:cached_tokens"}
	// sglSpecAcceptLength is SGLang's mean accept length: below 1 (SGLang
	// exports 0 without speculative decoding), its spec_accept_rate says
	// nothing.
	sglSpecAcceptLength = names{"sglang:spec_accept_length"}
	// sglCacheTiers are the cache_source values that become tier labels.
	sglCacheTiers = map[string]bool{"device": true, "host": true, "storage": true}
)

// readSGLang reads cached prompt tokens by tier and clears the acceptance
// rate of an engine without speculative decoding.
func readSGLang(p page, s *Snapshot) {
	if mf := p.first(sglCachedTokens); mf != nil {
		s.CacheTokensByTier = map[string]float64{}
		var cached float64
		for _, m := range mf.GetMetric() {
			v := scalar(m)
			if math.IsNaN(v) {
				continue
			}
			cached += v
			// Only SGLang's known tiers become label values: a page cannot
			// make slaprobe export series without bound.
			if tier, _ := labelValue(m, "cache_source"); sglCacheTiers[tier] {
				s.CacheTokensByTier[tier] += v
			}
		}
		if len(s.CacheTokensByTier) == 0 {
			s.CacheTokensByTier = nil
		}
		if p.got[sigPromptTokens] {
			s.PromptCacheHit, s.PromptComputed = cached, math.Max(0, s.PromptTokens-cached)
			s.HasPromptBySource = true
		}
	}
	// Without speculative decoding SGLang still exports both gauges, at 0;
	// with it, a step emits at least one token (accept length >= 1).
	if l, ok := p.mean(sglSpecAcceptLength); ok && l < 1 {
		s.SpecAcceptRate, s.HasSpecAcceptRate = 0, false
	}
}

// tpRank0 keeps a label set without tp_rank, or with tp_rank "0".
func tpRank0(m *dto.Metric) bool {
	r, ok := labelValue(m, "tp_rank")
	return !ok || r == "0"
}
