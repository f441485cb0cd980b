// Package vllmsim is a simulated vLLM engine behind a vLLM-compatible OpenAI API. It is the embedded
// target of `slaprobe demo`, what `slaprobe sim` serves, and the exact ground truth of the prober's
// accuracy, sweep and live-signal tests.
//
// # API
//
// POST /v1/chat/completions and /v1/completions (streaming and not), POST /v1/responses (OpenAI
// Responses) and /v1/messages (Anthropic Messages) with vLLM's typed events (typedapi.go), GET /v1/models, POST /tokenize,
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
//     MaxNumSeqs requests run, its context fits the free KV cache, and the uncached prompt tokens of
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
// KV usage (vllm:kv_cache_usage_perc) = tokens held by running requests / KVCacheTokens (blocks
// shared through the prefix cache are counted once per request). When the running requests'
// next step would not fit, the most recently admitted is preempted: it goes back to the front of the
// queue and is prefilled again (prompt + generated) when readmitted (vllm:num_preemptions_total).
//
// Prefix caching (EnablePrefixCaching, on by default): prompt token ids are cut into 16-token blocks
// with chained hashes, the first block's hash including cache_salt. Blocks of admitted prompts are
// kept in an LRU of KVCacheTokens/16 blocks from the start of their prefill step (vLLM caches full
// blocks when it schedules them), so requests admitted in later steps can hit them. A request's
// cached tokens are its leading run of known blocks, at most ⌊(P−1)/16⌋×16 (at least one token is
// always computed). So a repeated identical prompt without salt hits, while a fresh salt or any
// change in the first block misses entirely.
// Hits reduce the prefill time (see PrefillTimeCached), are reported in
// usage.prompt_tokens_details.cached_tokens (when EnablePromptTokensDetails) and in
// vllm:prefix_cache_queries_total / vllm:prefix_cache_hits_total (tokens, counted at first admission).
//
// # Server-side metrics
//
// TTFT runs from the request's entry into the engine queue (Trace.Submitted) to its first token;
// inter-token latency has one sample per engine output (a multi-token step is one sample); queue time
// is Submitted → Admitted; prefill time Admitted → first token; decode time first → last token.
// Gauges are read live at scrape time.
package vllmsim
