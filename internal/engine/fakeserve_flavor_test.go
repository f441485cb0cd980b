package engine

// fakeserve is a made-up engine, registered only in this package's tests:
// it is what adding an engine takes, one file with its table. Its names
// are not vLLM's, two of its units are not seconds or ratios, and it is
// detected by its own families.
var fakeserveFlavor = register(flavor{
	name: "fakeserve", prefix: "fakeserve_", precedence: 100,
	rows: []row{
		{signal: sigRunning, names: names{"fakeserve_active_requests"}},
		{signal: sigWaiting, names: names{"fakeserve_queue_depth"}},
		{signal: sigKVCache, names: names{"fakeserve_kv_used_percent"}, div: 100}, // 0..100
		{signal: sigGenerationTokens, names: names{"fakeserve_output_tokens_total"}},
		{signal: sigPromptTokens, names: names{"fakeserve_input_tokens_total"}},
		{signal: sigQueueTime, names: names{"fakeserve_queue_wait_seconds"}},
		{signal: sigTTFT, names: names{"fakeserve_ttft_seconds"}},
		{signal: sigITL, names: names{"fakeserve_token_gap_milliseconds"}, div: 1000}, // ms
		{signal: sigRequestsFinished, names: names{"fakeserve_request_seconds"}},
		{signal: sigPrefixCacheQueries, names: names{"fakeserve_prefix_lookups_total"}},
		{signal: sigPrefixCacheHits, names: names{"fakeserve_prefix_hits_total"}},
		{signal: sigPreemptions, names: names{"fakeserve_evictions_total"}},
	},
})
