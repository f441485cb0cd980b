package engine

import "math"

// vLLM's table. Where the names come from (docs/engines.md has the full
// table; the fixtures in testdata follow these sources, testdata/README.md):
// the families of vllm-project/vllm
// tests/entrypoints/instrumentator/test_metrics.py (EXPECTED_METRICS_V1,
// commit 20ef9d82bba5); the tail families (waiting by reason, prompt tokens
// by source, sleep state, spec decode, NIXL) from vllm/v1/metrics/loggers.py
// and vllm/v1/spec_decode/metrics.py (PrometheusStatLogger). Older names
// (gpu_cache_usage_perc, gpu_prefix_cache_*, time_per_output_token_seconds,
// counters without _total) are vLLM V0's, still served by some simulators.
var vllmFlavor = register(flavor{
	name: "vllm", prefix: "vllm:", precedence: 10,
	rows: []row{
		{signal: sigRunning, names: names{"vllm:num_requests_running"}},
		{signal: sigWaiting, names: names{"vllm:num_requests_waiting"}},
		{signal: sigKVCache, names: names{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}}, // 0..1 despite the name
		{signal: sigGenerationTokens, names: names{"vllm:generation_tokens_total", "vllm:generation_tokens"}},
		{signal: sigPromptTokens, names: vllmPromptTokens}, // cached tokens included
		{signal: sigQueueTime, names: names{"vllm:request_queue_time_seconds"}},
		{signal: sigTTFT, names: names{"vllm:time_to_first_token_seconds"}},
		{signal: sigITL, names: names{"vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"}},
		{signal: sigRequestsFinished, names: names{"vllm:e2e_request_latency_seconds"}},
		{signal: sigPrefixCacheQueries, names: names{"vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries",
			"vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries"}},
		{signal: sigPrefixCacheHits, names: names{"vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits",
			"vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits"}},
		{signal: sigSpecDraftTokens, names: names{"vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_draft_tokens"}},
		{signal: sigSpecAcceptedTokens, names: names{"vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens"}},

		// What explains a slow tail.
		{signal: sigWaitingCapacity, names: vllmWaitingByReason, where: label{"reason", "capacity"}},
		{signal: sigWaitingDeferred, names: vllmWaitingByReason, where: label{"reason", "deferred"}}, // LoRA budget, KV transfer, blocked
		{signal: sigPreemptions, names: names{"vllm:num_preemptions_total", "vllm:num_preemptions"}},
		{signal: sigPrefillTime, names: names{"vllm:request_prefill_time_seconds"}},
		{signal: sigDecodeTime, names: names{"vllm:request_decode_time_seconds"}},
		{signal: sigAdmissionRejections, names: names{"vllm:admission_rejections_total", "vllm:admission_rejections"}}, // all reasons
		{signal: sigKVTransferTime, names: names{"vllm:nixl_xfer_time_seconds"}},
		{signal: sigKVTransferFailures, names: names{"vllm:nixl_num_failed_transfers_total", "vllm:nixl_num_failed_transfers"}},
		{signal: sigHook, names: vllmPromptBySource},
		{signal: sigHook, names: vllmPromptCached},
		{signal: sigHook, names: vllmSleepState},

		// The live length mix (workload: live).
		{signal: sigPromptLength, names: names{"vllm:request_prompt_tokens"}},
		{signal: sigOutputLength, names: names{"vllm:request_generation_tokens"}},
	},
	hook:    readVLLM,
	lengths: "vLLM exports it",
})

var (
	vllmPromptTokens    = names{"vllm:prompt_tokens_total", "vllm:prompt_tokens"}
	vllmWaitingByReason = names{"vllm:num_requests_waiting_by_reason"}
	vllmPromptBySource  = names{"vllm:prompt_tokens_by_source_total", "vllm:prompt_tokens_by_source"}
	vllmPromptCached    = names{"vllm:prompt_tokens_cached_total", "vllm:prompt_tokens_cached"}
	vllmSleepState      = names{"vllm:engine_sleep_state"}

	// vllmPromptSources maps vLLM's prompt_tokens_by_source sources to slaprobe's.
	vllmPromptSources = map[string]string{
		"local_compute":        SourceComputed,
		"local_cache_hit":      SourceCacheHit,
		"external_kv_transfer": SourceKVTransfer,
	}
)

// readVLLM reads prompt tokens by source and the sleep state.
func readVLLM(p page, s *Snapshot) {
	// prompt_tokens_by_source is preferred: the prefix_cache_queries/hits
	// counters re-counted a waiting request at every scheduler retry before
	// vLLM PR #48860.
	if mf := p.first(vllmPromptBySource); mf != nil {
		for _, m := range mf.GetMetric() {
			v := scalar(m)
			if math.IsNaN(v) {
				continue
			}
			src, _ := labelValue(m, "source")
			switch vllmPromptSources[src] {
			case SourceComputed:
				s.PromptComputed += v
			case SourceCacheHit:
				s.PromptCacheHit += v
			case SourceKVTransfer:
				s.PromptKVTransfer += v
			}
		}
		s.HasPromptBySource, s.HasPromptKVTransfer = true, true
	} else if cached, _, ok := p.sum(vllmPromptCached); ok && p.got[sigPromptTokens] {
		// prompt_tokens_cached counts local and external hits alike.
		s.PromptCacheHit, s.PromptComputed = cached, math.Max(0, s.PromptTokens-cached)
		s.HasPromptBySource = true
	}

	if mf := p.first(vllmSleepState); mf != nil {
		for _, m := range mf.GetMetric() {
			if st, _ := labelValue(m, "sleep_state"); st == "awake" {
				s.HasSleepState = true
				// Any engine asleep makes the server asleep for a probe
				// that lands on it.
				if scalar(m) == 0 {
					s.Sleeping = true
				}
			}
		}
	}
}
