// Package vllmsim is a simulated vLLM engine behind a vLLM-compatible OpenAI API. It is the embedded
// target of `slaprobe demo`, what `slaprobe sim` serves, and the exact ground truth of the prober's
// accuracy, sweep and live-signal tests.
//
// # API
//
// POST /v1/chat/completions and /v1/completions (streaming and not), POST /v1/responses (OpenAI
// Responses) and /v1/messages (Anthropic Messages) with vLLM's typed events (typedapi.go); an agent's
// history in each API's shape (chat tool_calls and role "tool" messages, Responses function_call and
// function_call_output items, Messages tool_use and tool_result blocks) becomes the same chat messages,
// the calls rendered after the assistant's content (tools.go); GET /v1/models, POST /tokenize,
// GET /health, GET /version, GET /metrics (own registry; vLLM V1 names with labels model_name and
// engine="0"). Streams follow vLLM: a role-only chat chunk (at once when Config.RoleChunkEarly, else
// written together with the first token), output chunks (content, or ReasoningField for the first
// ReasoningTokens tokens), the last one with finish_reason, then the usage chunk (choices: []) when
// stream_options.include_usage, then data: [DONE]. continuous_usage_stats (with include_usage) puts a
// running usage on every chunk. return_token_ids adds choices[].token_ids. Each SSE event is written
// with one Write and one Flush; when the handler lags behind the engine, the tokens of several steps
// merge into one chunk (vLLM does the same under back-pressure), so count tokens with usage or the
// Trace, never by chunks. Errors use {"error": {message, type, param, code}}: 404 for an unknown
// model, 400 (before streaming) when prompt + max_tokens exceeds MaxModelLen.
//
// Request fields honoured: model, messages / prompt, stream, stream_options, max_tokens,
// max_completion_tokens (chat; wins over max_tokens), min_tokens, ignore_eos, cache_salt, n (1 only),
// return_token_ids, tools and chat_template_kwargs.enable_thinking (both change the templated prompt,
// as on a real server), add_generation_prompt. Without max_tokens, chat may generate up to
// MaxModelLen − prompt and completions 16 tokens (vLLM's defaults). Without ignore_eos a request may
// stop early ("stop") at a seeded geometric length of mean EOSMeanTokens, never below min_tokens.
//
// The FaultHeader request header (TEST ONLY) injects one fault into one request; see Faults.
//
// # Tokenizer
//
// See CountTokens and Config.ChatPromptTokens: one token per started 4 letters of a word, one per
// digit, newline or other symbol; a chat message adds 4 + tokens(role) tokens, the generation prompt 5.
// /tokenize, usage.prompt_tokens and Trace.PromptTokens always agree. Every output token is one short
// word (or "," / "."), so re-tokenizing the output text gives completion_tokens.
//
// # Timing model
//
// One engine goroutine runs steps back to back on an absolute schedule: each step ends at the previous
// step's end + its duration, so lateness does not accumulate (up to 50 ms of it is caught up by the
// next steps). After idling, the schedule restarts at the submission of the request that woke the
// engine (when the loop woke within 0.5 ms of it, else when it woke), so the loop's own wake-up is
// not added to TTFT. Between steps the goroutine is parked on a timerfd(2) (Linux; a Go timer
// elsewhere), which leaves every P to the HTTP handlers and to a client in the same process, and it
// yields in a loop (runtime.Gosched) through the last min(100 µs, duration/20) of a step: waking
// from any sleep takes about 50 µs on a virtual machine. On an idle machine steps so end within a
// few µs of their deadline; on a loaded one they can end 0.1–1 ms late (then the next steps catch
// up). Trace times are what really happened, so compare clients with the Trace, and the Trace with
// the model below. At each step boundary:
//
//  1. Admission (FIFO, no overtaking): the head of the waiting queue is admitted while fewer than
//     MaxNumSeqs requests run, its blocks fit the free KV cache (below), and the uncached prompt tokens of
//     this step stay within MaxNumBatchedTokens (the first admission of a step always passes that
//     cap). If any request was admitted, the step is a prefill step of duration
//     TimeScale × (PrefillOverhead + Σ_admitted [(P−C)/PrefillTokensPerSecond + PrefillQuadratic×((P/1024)² − (C/1024)²)])
//     (P prompt tokens, C prefix-cache hits). Running requests do NOT decode during a prefill step
//     (vLLM without chunked prefill); prefill has priority over decode. Each admitted request gets its
//     first token at the end of the step.
//  2. Otherwise the running batch decodes: one step of DecodeStep(batch, Σcontext) =
//     TimeScale × (DecodeBase + DecodePerSeq×batch + DecodePerKVToken×Σcontext), context being a
//     request's prompt + tokens generated so far; every running request gets TokensPerStep tokens
//     (fewer at its end).
//
// Predicting the truth from Config alone (server side, i.e. times in Trace; a client adds its own
// network and parsing latency, well under a millisecond on loopback):
//
//   - TTFT at N=1, idle engine, no cache hit: Config.PrefillTime(P). With C cached tokens:
//     Config.PrefillTimeCached(P, C). The model covers Trace.Submitted → the step's end; the Trace
//     adds, before it, Arrived → Submitted (reading the body, JSON decoding, tokenization: 0.2–1 ms
//     for a 1K prompt without -race, a few ms for 100K tokens), and after it the step end →
//     FirstTokenWritten: waking the handler, building the chunk, and its Write + Flush, whose
//     write(2) on loopback also delivers to and wakes the reader. On a 2-core VM that is 0.1–0.15 ms
//     (median 0.14 ms, of which the write(2) 50–90 µs), more when the CPUs are busy.
//   - Decode time (first → last token) at N=1: Config.DecodeTime(1, P, O). Mean ITL as the reports
//     define it (decode_time / (O−1)): Config.ITL(1, P, O); with TokensPerStep=1 it equals
//     DecodeStep(1, P + O/2) exactly. Per-user decode speed = 1/ITL.
//   - Closed loop with N requests all decoding in lockstep (prompt P, output O): per-user ITL =
//     Config.ITL(N, P, O); system throughput = Config.SteadyThroughput(N, ctx) =
//     N×TokensPerStep / DecodeStep(N, N×ctx) tok/s with ctx ≈ P + O/2. This ignores prefill stalls:
//     in a real closed loop each new request's prefill (≈ PrefillTime(P)) pauses every running
//     decode, which matters when PrefillTime(P) is not small against O×ITL. A fully synchronised
//     round of N requests lasts S×o + N×(PrefillTime(P) − o) + DecodeTime(N, P, O), with
//     o = TimeScale×PrefillOverhead and S = ⌈N / max(1, ⌊MaxNumBatchedTokens/P⌋)⌉ prefill steps.
//   - Scaling efficiency at N = ITL(1, P, O) / ITL(N, P, O) (steady state).
//   - Burst of N requests at once: they are prefilled in steps of ⌊MaxNumBatchedTokens/P⌋ requests
//     (at least 1), each step taking PrefillOverhead + k×(P/rate + quadratic), before any decode;
//     request i's TTFT is the sum of the prefill steps up to and including its own.
//
// With DefaultConfig (TimeScale 1): PrefillTime(1024) ≈ 104 ms, PrefillTime(32768) ≈ 1.33 s;
// DecodeStep(1, 1152) ≈ 6.03 ms (≈ 166 tok/s); DecodeStep(32, 32×1152) ≈ 11.6 ms (≈ 52 % scaling
// efficiency before prefill stalls); DecodeStep(1, 256K) ≈ 12.6 ms (≈ 80 tok/s).
//
// # KV cache and prefix cache
//
// The KV cache is vLLM v1's block pool: ⌈KVCacheTokens/16⌉ blocks of BlockSize (16) tokens
// (vllm:cache_config_info's num_gpu_blocks), shared by running requests and the prefix cache.
//
//   - A running request holds the blocks of its context: ⌈(P + generated + the tokens of its next
//     step)/16⌉, taken at admission (prompt and the first token) and as it grows, one decode step
//     ahead. A block shared through the prefix cache is held once, by reference.
//   - A full block gets a hash once its 16 tokens' KV is computed (chained over the request's
//     token ids, the first block's hash including cache_salt), and from then on is a prefix-cache
//     entry. This holds for generated tokens too: their ids are the simulator's tokenizer's ids of
//     the output text, continuing the prompt's hash chain, so a follow-up chat request that replays
//     the answer as an assistant message hits the whole conversation. The chat template puts
//     nothing between the generation prompt and the answer, and the answer re-tokenizes to the
//     generated ids; the <|im_end|> and newline the template adds after a replayed answer come
//     after the cached blocks. The last generated token's KV is never computed (no step runs after
//     it), so a finished request leaves ⌊(P+O−1)/16⌋ cached blocks. Reasoning tokens are part of
//     the chain, so a replay that drops them (as chat templates do) hits only the prompt's blocks.
//   - Blocks freed by a finished, aborted or preempted request keep their hash: they are free but
//     still cached. Free blocks wait in a queue, least recently freed first, each request's last
//     block first (vLLM frees them in reverse, so a shared head outlives a private tail); a prefix
//     hit takes a block out of the queue, and freeing it again puts it at the back. Blocks never
//     used come before the queue. New tokens take blocks from the front, which evicts their
//     cached KV (Stats.EvictedBlocks): least recently used first.
//   - Admission needs, free now, the new blocks plus the hit blocks nobody holds. When the running
//     requests' next decode step does not fit, the most recently admitted is preempted (vLLM v1's
//     recompute preemption): its blocks are freed (still cached), it goes back to the front of the
//     queue and is prefilled again (prompt + generated) when readmitted, hitting whatever of its
//     blocks is still cached (vllm:num_preemptions_total, Trace.Preemptions).
//   - vllm:kv_cache_usage_perc = blocks held by running requests / all blocks: free cached blocks
//     do not count, so an idle engine reads 0 whatever it has cached (as in vLLM).
//
// A request's cached tokens are its leading run of cached blocks, at most ⌊(P−1)/16⌋×16 (at
// least one token is always computed). Blocks cached in a prefill step are found by requests
// admitted in later steps. So a repeated identical prompt without salt hits, while a fresh salt or
// any change in the first block misses entirely. With EnablePrefixCaching off nothing is hashed
// and nothing hits; the pool still bounds the running requests.
// Hits reduce the prefill time (see PrefillTimeCached: TTFT covers only the uncached tokens), are
// reported in usage.prompt_tokens_details.cached_tokens on chat and completions,
// input_tokens_details.cached_tokens on Responses and cache_read_input_tokens on Messages (when
// EnablePromptTokensDetails; Messages' input_tokens are then the uncached ones), and in
// vllm:prefix_cache_queries_total / vllm:prefix_cache_hits_total, vllm:prompt_tokens_cached_total
// and vllm:prompt_tokens_by_source_total{source="local_cache_hit"} (the rest of the prompt under
// "local_compute", none under "external_kv_transfer"), all in tokens, counted at first admission.
// vllm:num_requests_waiting_by_reason puts every waiting request under "capacity"; vllm:engine_sleep_state
// is always awake.
//
// How many conversations' histories fit (K): each finished turn of P prompt and O generated
// tokens leaves ⌈(P+O)/16⌉ blocks in the pool, all cached but the last, and later turns take
// never-used blocks before evicting any; so K = ⌊blocks / ⌈(P+O)/16⌉⌋ first turns run one after
// another evict nothing, and the (K+1)th evicts the oldest one's blocks from its tail
// (TestEvictionStartsPastK).
//
// # Server-side metrics
//
// TTFT runs from the request's entry into the engine queue (Trace.Submitted) to its first token;
// inter-token latency has one sample per engine output (a multi-token step is one sample); queue time
// is Submitted → Admitted; prefill time Admitted → first token; decode time first → last token.
// Gauges are read live at scrape time.
package vllmsim
