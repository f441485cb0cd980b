package engine

// SeriesHelp is the HELP text of each series collector.EngineCollector
// exports from what it read of an engine's /metrics (and llama.cpp's
// /props), by name. The texts name the families of vLLM, SGLang and
// llama.cpp server they were written for; which family of each engine
// feeds a Snapshot field is that engine's table (vllm.go, sglang.go,
// llamacpp.go), and an engine added as a table is exported under the same
// names and HELP.
var SeriesHelp = map[string]string{
	"slaprobe_engine_up":                                "Whether the last scrape of the engine's own /metrics succeeded and held vLLM, SGLang or llama.cpp server metrics (1) or not (0).",
	"slaprobe_engine_scrape_errors_total":               "Failed scrapes of the engine's own /metrics.",
	"slaprobe_engine_requests_running":                  "Requests the engine is running (vllm:num_requests_running, sglang:num_running_reqs, llamacpp:requests_processing), summed over engines.",
	"slaprobe_engine_requests_waiting":                  "Requests waiting in the engine's queue (vllm:num_requests_waiting, sglang:num_queue_reqs, llamacpp:requests_deferred), summed over engines.",
	"slaprobe_engine_kv_cache_usage_ratio":              "KV-cache usage, 0 to 1 (vllm:kv_cache_usage_perc or the older gpu_cache_usage_perc, sglang:token_usage), averaged over engines.",
	"slaprobe_engine_generation_tokens_total":           "Output tokens the engine generated (vllm:generation_tokens_total, sglang:generation_tokens_total), as last read.",
	"slaprobe_engine_prompt_tokens_total":               "Prompt tokens the engine processed (vllm:prompt_tokens_total, sglang:prompt_tokens_total), as last read.",
	"slaprobe_engine_requests_finished_total":           "Requests the engine finished (the count of vllm:, sglang:e2e_request_latency_seconds), as last read; absent for llama.cpp server, which counts none.",
	"slaprobe_engine_last_scrape_timestamp_seconds":     "Unix time of the last successful scrape of the engine's /metrics.",
	"slaprobe_engine_requests_waiting_by_reason":        "Requests waiting in the engine's queue by why they wait: capacity (for a batch slot or KV cache) or deferred (LoRA budget, KV transfer, blocked), from vllm:num_requests_waiting_by_reason; only where the engine splits them.",
	"slaprobe_engine_preemptions_total":                 "Requests preempted (vllm:num_preemptions_total) or retracted (sglang:num_retracted_requests_total; absent before the first retraction, read as 0) for want of KV cache, as last read.",
	"slaprobe_engine_prompt_tokens_by_source_total":     "Prompt tokens by where their KV came from: computed, cache_hit (prefix cache) or kv_transfer (from another instance), as last read; see docs/live-signals.md for each engine's source.",
	"slaprobe_engine_cache_tokens_by_tier_total":        "Cached prompt tokens by the cache tier they came from (sglang:cached_tokens_total by cache_source: device, host, storage), as last read.",
	"slaprobe_engine_request_phase_seconds":             "The engine's own histogram of time its requests spent in each phase (queue, prefill, decode), all traffic, in the engine's buckets, as last read.",
	"slaprobe_engine_ttft_seconds":                      "The engine's own time-to-first-token histogram (vllm:, sglang:time_to_first_token_seconds), all traffic, in the engine's buckets, as last read.",
	"slaprobe_engine_inter_token_latency_seconds":       "The engine's own inter-token latency histogram (vllm:, sglang:inter_token_latency_seconds), all traffic, in the engine's buckets, as last read.",
	"slaprobe_engine_sleeping":                          "1 while the engine reports it is asleep (vllm:engine_sleep_state{sleep_state=\"awake\"} is 0 on any engine), else 0.",
	"slaprobe_engine_admission_rejections_total":        "Requests the engine refused at admission, all reasons (vllm:admission_rejections_total, where exported), as last read.",
	"slaprobe_engine_kv_transfer_seconds":               "The engine's own histogram of KV-cache transfer time in disaggregated prefill (vllm:nixl_xfer_time_seconds), as last read.",
	"slaprobe_engine_kv_transfer_failures_total":        "Failed KV-cache transfers in disaggregated prefill (vllm:nixl_num_failed_transfers_total), as last read.",
	"slaprobe_engine_spec_decode_draft_tokens_total":    "Speculative draft tokens proposed (vllm:, llamacpp:spec_decode_num_draft_tokens_total), as last read.",
	"slaprobe_engine_spec_decode_accepted_tokens_total": "Speculative draft tokens accepted (vllm:, llamacpp:spec_decode_num_accepted_tokens_total), as last read.",
	"slaprobe_engine_spec_decode_acceptance_ratio":      "The engine's speculative acceptance, accepted over draft tokens (sglang:spec_accept_rate), averaged over engines.",
	"slaprobe_engine_slots":                             "Requests the server can run at once (llama.cpp server's /props total_slots, read once when its metrics are first found).",
}
