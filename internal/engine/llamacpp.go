package engine

// llama.cpp server's table (--metrics; no labels). Where the names come
// from (docs/engines.md has the full table; testdata/README.md the
// fixtures): ggml-org/llama.cpp tools/server (the metrics result's
// Prometheus rendering; tools/server/README.md's table). spec_decode_*
// came with PR #26389, prompt_tokens_cached_total with commit decaf508b
// (2026-08); kv_cache_usage_ratio was removed upstream (PR #13660) and is
// read from older builds only.
var llamacppFlavor = register(flavor{
	name: "llamacpp", prefix: "llamacpp:", precedence: 30,
	rows: []row{
		{signal: sigRunning, names: names{"llamacpp:requests_processing"}},
		{signal: sigWaiting, names: names{"llamacpp:requests_deferred"}},
		{signal: sigKVCache, names: names{"llamacpp:kv_cache_usage_ratio"}},
		{signal: sigGenerationTokens, names: names{"llamacpp:tokens_predicted_total"}},
		{signal: sigPromptTokens, names: names{"llamacpp:prompt_tokens_total"}}, // cached tokens left out: the hook adds them
		{signal: sigSpecDraftTokens, names: names{"llamacpp:spec_decode_num_draft_tokens_total"}},
		{signal: sigSpecAcceptedTokens, names: names{"llamacpp:spec_decode_num_accepted_tokens_total"}},
		{signal: sigHook, names: lcppPromptCached},
	},
	hook:  readLlamaCpp,
	props: true, // total_slots from /props
	// No length rows: llama.cpp server counts tokens and requests in
	// progress, never tokens per request, so workload: live cannot read a
	// mix there.
	lengths: "llama.cpp server exports token counters only (prompt_tokens_total, tokens_predicted_total), no histogram of tokens per request",
})

var lcppPromptCached = names{"llamacpp:prompt_tokens_cached_total"}

// readLlamaCpp gives llama.cpp's counters vLLM's meaning: the queue is
// known only with both gauges, and PromptTokens counts cached tokens too.
func readLlamaCpp(p page, s *Snapshot) {
	s.HasQueue = s.HasQueue && p.got[sigWaiting]
	// llama.cpp's prompt_tokens_total leaves cached tokens out; vLLM's and
	// SGLang's count them. PromptTokens keeps vLLM's meaning.
	computed, hasP := s.PromptTokens, p.got[sigPromptTokens]
	cached, _, hasC := p.sum(lcppPromptCached)
	s.PromptTokens = computed + cached
	s.HasTokens = s.HasTokens && hasP
	if hasP && hasC {
		s.PromptComputed, s.PromptCacheHit, s.HasPromptBySource = computed, cached, true
	}
}
