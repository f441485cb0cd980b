package vllmsim

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Config holds every knob of the simulated engine. Start from DefaultConfig and change what you need;
// decode a YAML file over DefaultConfig() so that omitted fields keep their defaults (several
// defaults are true or non-zero).
type Config struct {
	// ModelName is the served model name: the only `model` the API accepts (an empty `model` is
	// accepted too) and the `model_name` label of every metric.
	ModelName string `yaml:"model_name"`
	// ModelRoot is reported as `root` by /v1/models. Empty means ModelName.
	ModelRoot string `yaml:"model_root"`
	// MaxModelLen is the context window: prompt + max_tokens above it is a 400 before streaming.
	MaxModelLen int `yaml:"max_model_len"`

	// MaxNumSeqs is the most requests that run (decode) at once; the rest wait in a FIFO queue.
	MaxNumSeqs int `yaml:"max_num_seqs"`
	// MaxNumBatchedTokens caps the uncached prompt tokens admitted in one prefill step. A request
	// whose prompt alone exceeds it is admitted alone. 0 means no cap.
	MaxNumBatchedTokens int `yaml:"max_num_batched_tokens"`
	// KVCacheTokens is the KV cache capacity in tokens (rounded up to whole BlockSize blocks),
	// shared by running requests and the prefix cache: blocks freed by finished requests stay
	// cached until new tokens need them, least recently freed first. A request is admitted only if
	// its blocks fit; when running requests outgrow it, the most recently admitted one is
	// preempted (recomputed later). Must be at least MaxModelLen. See the package doc.
	KVCacheTokens int `yaml:"kv_cache_tokens"`
	// EnablePrefixCaching turns on automatic prefix caching (on by default, as in vLLM V1).
	EnablePrefixCaching bool `yaml:"enable_prefix_caching"`

	// PrefillOverhead is the fixed cost of one prefill step (paid once per step, whatever the
	// number of requests it admits).
	PrefillOverhead time.Duration `yaml:"prefill_overhead"`
	// PrefillTokensPerSecond is the linear prefill rate for uncached prompt tokens.
	PrefillTokensPerSecond float64 `yaml:"prefill_tokens_per_second"`
	// PrefillQuadratic is the attention term: PrefillQuadratic × ((P/1024)² − (C/1024)²) for a
	// prompt of P tokens of which C are cached. 0 disables it.
	PrefillQuadratic time.Duration `yaml:"prefill_quadratic"`

	// DecodeBase, DecodePerSeq and DecodePerKVToken define one decode step:
	// DecodeBase + DecodePerSeq×batch + DecodePerKVToken×Σcontext.
	DecodeBase       time.Duration `yaml:"decode_base"`
	DecodePerSeq     time.Duration `yaml:"decode_per_seq"`
	DecodePerKVToken time.Duration `yaml:"decode_per_kv_token"`
	// TokensPerStep is how many tokens each running request gets per decode step (>1 mimics MTP /
	// speculative decoding: one chunk then carries several tokens). Prefill always yields 1 token.
	TokensPerStep int `yaml:"tokens_per_step"`
	// TimeScale multiplies every modelled duration (prefill, decode; not Faults.StallFor).
	// 1 is real time; 0.1 runs ten times faster.
	TimeScale float64 `yaml:"time_scale"`

	// EOSMeanTokens is the mean of the seeded geometric "natural" output length used when a
	// request has neither ignore_eos nor a min_tokens that reaches max_tokens: such a request may
	// stop early with finish_reason "stop". 0 disables early stops.
	EOSMeanTokens int `yaml:"eos_mean_tokens"`
	// NoIgnoreEOS makes the engine behave like servers without vLLM's ignore_eos and min_tokens
	// (Ollama, TGI, hosted APIs): the early stops of EOSMeanTokens apply whatever the request asks.
	NoIgnoreEOS bool `yaml:"no_ignore_eos"`
	// ReasoningTokens is how many leading output tokens of a chat request are reasoning (sent in
	// ReasoningField instead of content). chat_template_kwargs.enable_thinking=false turns it off
	// per request.
	ReasoningTokens int `yaml:"reasoning_tokens"`
	// ReasoningField is the delta field for reasoning tokens: "reasoning_content" or "reasoning".
	ReasoningField string `yaml:"reasoning_field"`
	// DefaultSystemPrompt is inserted by the chat template when a request has no system message
	// (some real templates do this; it shifts a nonce at the start of the user message into a later
	// prefix-cache block). Empty means none.
	DefaultSystemPrompt string `yaml:"default_system_prompt"`

	// RoleChunkEarly sends the role-only chat chunk as soon as the request is accepted, before
	// prefill. When false it is written together with the first token, as vLLM does.
	RoleChunkEarly bool `yaml:"role_chunk_early"`
	// EnablePromptTokensDetails adds usage.prompt_tokens_details.cached_tokens
	// (vLLM's --enable-prompt-tokens-details, off by default in vLLM).
	EnablePromptTokensDetails bool `yaml:"enable_prompt_tokens_details"`
	// LegacyMetricNames exposes vllm:gpu_cache_usage_perc and vllm:time_per_output_token_seconds
	// instead of vllm:kv_cache_usage_perc and vllm:inter_token_latency_seconds (old vLLM).
	LegacyMetricNames bool `yaml:"legacy_metric_names"`

	// EnablePerRequestMetrics adds vLLM's per-request `metrics` object (vLLM's
	// --enable-per-request-metrics) to every response with usage: on the final usage chunk of a
	// stream (so only with stream_options.include_usage) and beside usage in a non-streaming
	// body. See PerRequestMetrics.
	EnablePerRequestMetrics bool `yaml:"enable_per_request_metrics"`
	// RequireIncludeMetrics sends that object only to a request that sets "include_metrics": true,
	// the second gate PR #46768's description proposed. vLLM's docs (docs/features/
	// per_request_metrics.md at 0377ba9ad8eb) gate it on the server flag alone, which is this off:
	// every request gets it (as slaprobe's demo relies on).
	RequireIncludeMetrics bool `yaml:"require_include_metrics"`
	// OTLPTracesEndpoint sends one `llm_request` span per request, with vLLM's attribute names, to
	// this OTLP endpoint (vLLM's --otlp-traces-endpoint), in the trace of the request's
	// traceparent header when it has one. Empty sends none.
	OTLPTracesEndpoint string `yaml:"otlp_traces_endpoint"`
	// OTLPTracesProtocol is "grpc" (the default, as in vLLM) or "http/protobuf"; empty reads
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, then OTEL_EXPORTER_OTLP_PROTOCOL.
	OTLPTracesProtocol string `yaml:"otlp_traces_protocol"`

	// Seed makes every random choice (early stops, output words, random faults) deterministic:
	// request number k always gets the same draws.
	Seed uint64 `yaml:"seed"`
	// TraceCapacity is how many recent requests keep a Trace.
	TraceCapacity int `yaml:"trace_capacity"`

	// Faults injects failures; the zero value injects none.
	Faults Faults `yaml:"faults"`
}

// Faults configures deterministic failure injection. A configured fault is applied to a request
// with probability Rate (seeded); when several are configured, one of them is picked uniformly.
// A token count N means "after the first output chunk that brings the client's total to ≥ N"; if the
// stream ends earlier the fault fires before the usage chunk and [DONE]. 0 disables a count-based
// fault here; the FaultHeader request header can also select a fault at 0 tokens.
//
// Non-streaming requests: error_event answers 500 once generation is over, cut closes the
// connection without a response, malformed sends half of the JSON body, omit_usage drops usage, and
// stall delays generation as for a stream.
type Faults struct {
	// Rate is the probability, per request, that one configured fault applies. Must be in (0, 1]
	// when any fault is configured.
	Rate float64 `yaml:"rate"`
	// ErrorStatus answers with this HTTP status (400–599) and a vLLM error body before streaming.
	ErrorStatus int `yaml:"error_status"`
	// ErrorEventAfterTokens sends `data: {"error": …}` then `data: [DONE]` mid-stream (after a 200).
	ErrorEventAfterTokens int `yaml:"error_event_after_tokens"`
	// CutAfterTokens closes the connection mid-stream, without [DONE].
	CutAfterTokens int `yaml:"cut_after_tokens"`
	// StallAfterTokens pauses the request inside the engine for StallFor once it has produced that
	// many tokens (the request stays in the batch; later tokens come at the normal pace).
	StallAfterTokens int           `yaml:"stall_after_tokens"`
	StallFor         time.Duration `yaml:"stall_for"`
	// OmitUsage drops every usage object even when stream_options.include_usage asks for it.
	OmitUsage bool `yaml:"omit_usage"`
	// MalformedChunkAfterTokens writes one truncated-JSON SSE event, then the stream goes on normally.
	MalformedChunkAfterTokens int `yaml:"malformed_chunk_after_tokens"`

	// AlternateSlowFirstToken and AlternateSlowToken, set together, make requests alternate between a
	// slow first token and a slow stream, in a cycle of four whatever Rate says: the first request of
	// each four waits AlternateSlowFirstToken before it enters the engine (its first token is that
	// late), the third gets each token after its first AlternateSlowToken late (it sits out the decode
	// steps in between, as a stall does), the second and fourth are untouched. Each of TTFT and ITL is
	// then slow on a quarter of the requests, and half the requests are slow on one of them: every
	// metric's mean can stay within a threshold that half the requests miss on one metric or the other.
	// A request given another fault (Rate, or FaultHeader) keeps it.
	AlternateSlowFirstToken time.Duration `yaml:"alternate_slow_first_token"`
	AlternateSlowToken      time.Duration `yaml:"alternate_slow_token"`
}

// alternate is the fault of the request numbered seq (from 1) under the alternating faults, or none.
func (f Faults) alternate(seq uint64) faultPlan {
	if f.AlternateSlowFirstToken <= 0 || f.AlternateSlowToken <= 0 {
		return faultPlan{}
	}
	switch seq % 4 {
	case 1:
		return faultPlan{name: FaultStall, after: 0, stallFor: f.AlternateSlowFirstToken}
	case 3:
		return faultPlan{name: FaultSlowStream, stallFor: f.AlternateSlowToken}
	}
	return faultPlan{}
}

// DefaultConfig returns a model resembling a ~35B-parameter MoE (3B active, FP8) served by vLLM on
// one H100 without chunked prefill: ~166 tok/s per user at 1K context and N=1 (ITL ≈ 6.0 ms),
// TTFT ≈ 0.1 s at 1K and ≈ 1.3 s at 32K alone, per-user prefill ≈ 23–26K tok/s at 8K–64K.
func DefaultConfig() Config {
	return Config{
		ModelName:   "slaprobe-sim-35b-a3b",
		ModelRoot:   "slaprobe/sim-35B-A3B-FP8",
		MaxModelLen: 262144,

		MaxNumSeqs:          256,
		MaxNumBatchedTokens: 16384,
		KVCacheTokens:       1_200_000,
		EnablePrefixCaching: true,

		PrefillOverhead:        70 * time.Millisecond,
		PrefillTokensPerSecond: 30000,
		PrefillQuadratic:       170 * time.Microsecond,

		DecodeBase:       5850 * time.Microsecond,
		DecodePerSeq:     150 * time.Microsecond,
		DecodePerKVToken: 25 * time.Nanosecond,
		TokensPerStep:    1,
		TimeScale:        1,

		EOSMeanTokens:  512,
		ReasoningField: ReasoningContentField,

		RoleChunkEarly:            true,
		EnablePromptTokensDetails: true,

		Seed:          1,
		TraceCapacity: 4096,
	}
}

// Reasoning field names accepted by Config.ReasoningField.
const (
	ReasoningContentField = "reasoning_content"
	ReasoningShortField   = "reasoning"
)

// BlockSize is the prefix-cache block size in tokens.
const BlockSize = 16

// Validate reports every invalid field, each naming the YAML field, its value and what is expected.
func (c Config) Validate() error {
	var errs []error
	bad := func(field string, value any, want string) {
		errs = append(errs, fmt.Errorf("%s: got %v, want %s", field, value, want))
	}
	if c.ModelName == "" {
		bad("model_name", `""`, "a non-empty name")
	}
	if c.MaxModelLen < 2*BlockSize {
		bad("max_model_len", c.MaxModelLen, fmt.Sprintf(">= %d", 2*BlockSize))
	}
	if c.MaxNumSeqs < 1 {
		bad("max_num_seqs", c.MaxNumSeqs, ">= 1")
	}
	if c.MaxNumBatchedTokens < 0 {
		bad("max_num_batched_tokens", c.MaxNumBatchedTokens, ">= 0 (0 = no cap)")
	}
	if c.KVCacheTokens < c.MaxModelLen {
		bad("kv_cache_tokens", c.KVCacheTokens, fmt.Sprintf(">= max_model_len (%d)", c.MaxModelLen))
	}
	if c.PrefillOverhead < 0 {
		bad("prefill_overhead", c.PrefillOverhead, ">= 0")
	}
	if !(c.PrefillTokensPerSecond > 0) || math.IsInf(c.PrefillTokensPerSecond, 0) {
		bad("prefill_tokens_per_second", c.PrefillTokensPerSecond, "a finite number > 0")
	}
	if c.PrefillQuadratic < 0 {
		bad("prefill_quadratic", c.PrefillQuadratic, ">= 0")
	}
	if c.DecodeBase < 0 {
		bad("decode_base", c.DecodeBase, ">= 0")
	}
	if c.DecodePerSeq < 0 {
		bad("decode_per_seq", c.DecodePerSeq, ">= 0")
	}
	if c.DecodePerKVToken < 0 {
		bad("decode_per_kv_token", c.DecodePerKVToken, ">= 0")
	}
	if c.DecodeBase >= 0 && c.DecodePerSeq >= 0 && c.DecodeBase+c.DecodePerSeq <= 0 {
		bad("decode_base + decode_per_seq", c.DecodeBase+c.DecodePerSeq, "> 0 (a decode step must take time)")
	}
	if c.TokensPerStep < 1 || c.TokensPerStep > 16 {
		bad("tokens_per_step", c.TokensPerStep, "1..16")
	}
	if !(c.TimeScale > 0) || math.IsInf(c.TimeScale, 0) {
		bad("time_scale", c.TimeScale, "a finite number > 0 (1 = real time)")
	}
	if c.EOSMeanTokens < 0 {
		bad("eos_mean_tokens", c.EOSMeanTokens, ">= 0 (0 = never stop early)")
	}
	if c.ReasoningTokens < 0 {
		bad("reasoning_tokens", c.ReasoningTokens, ">= 0")
	}
	if c.ReasoningField != ReasoningContentField && c.ReasoningField != ReasoningShortField {
		bad("reasoning_field", fmt.Sprintf("%q", c.ReasoningField), fmt.Sprintf("%q or %q", ReasoningContentField, ReasoningShortField))
	}
	switch c.OTLPTracesProtocol {
	case "", "grpc", "http/protobuf":
	default:
		bad("otlp_traces_protocol", c.OTLPTracesProtocol, `"grpc" or "http/protobuf"`)
	}
	if c.TraceCapacity < 1 {
		bad("trace_capacity", c.TraceCapacity, ">= 1")
	}
	errs = append(errs, c.Faults.validate()...)
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("vllmsim config: %w", errors.Join(errs...))
}

func (f Faults) validate() []error {
	var errs []error
	bad := func(field string, value any, want string) {
		errs = append(errs, fmt.Errorf("faults.%s: got %v, want %s", field, value, want))
	}
	if f.ErrorStatus != 0 && (f.ErrorStatus < 400 || f.ErrorStatus > 599) {
		bad("error_status", f.ErrorStatus, "0 (off) or 400..599")
	}
	for _, n := range []struct {
		field string
		v     int
	}{
		{"error_event_after_tokens", f.ErrorEventAfterTokens},
		{"cut_after_tokens", f.CutAfterTokens},
		{"stall_after_tokens", f.StallAfterTokens},
		{"malformed_chunk_after_tokens", f.MalformedChunkAfterTokens},
	} {
		if n.v < 0 {
			bad(n.field, n.v, ">= 0 (0 = off)")
		}
	}
	if f.StallFor < 0 {
		bad("stall_for", f.StallFor, ">= 0")
	}
	if (f.AlternateSlowFirstToken > 0) != (f.AlternateSlowToken > 0) || f.AlternateSlowFirstToken < 0 || f.AlternateSlowToken < 0 {
		bad("alternate_slow_first_token and alternate_slow_token", fmt.Sprintf("%v and %v", f.AlternateSlowFirstToken, f.AlternateSlowToken),
			"both > 0 (the two halves of the alternation), or both 0 (off)")
	}
	if f.StallAfterTokens > 0 && f.StallFor <= 0 {
		bad("stall_for", f.StallFor, "> 0 when stall_after_tokens is set")
	}
	if !(f.Rate >= 0 && f.Rate <= 1) {
		bad("rate", f.Rate, "0..1")
	} else if len(f.configured()) > 0 && f.Rate == 0 {
		bad("rate", f.Rate, "> 0 when a fault is configured (it is the probability per request)")
	}
	return errs
}

// scale applies TimeScale to a modelled duration.
func (c Config) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.TimeScale)
}

// prefillWork is the per-request part of a prefill step (no overhead, no TimeScale).
func (c Config) prefillWork(promptTokens, cachedTokens int) time.Duration {
	if cachedTokens > promptTokens {
		cachedTokens = promptTokens
	}
	linear := float64(promptTokens-cachedTokens) / c.PrefillTokensPerSecond * float64(time.Second)
	p, k := float64(promptTokens)/1024, float64(cachedTokens)/1024
	quad := float64(c.PrefillQuadratic) * (p*p - k*k)
	return time.Duration(linear + quad)
}

// PrefillTime is the duration of a prefill step that admits one request with promptTokens and no
// prefix-cache hit: TimeScale × (PrefillOverhead + P/PrefillTokensPerSecond + PrefillQuadratic×(P/1024)²).
// At N=1 it is the server-side TTFT (arrival → first token written) up to scheduling noise.
func (c Config) PrefillTime(promptTokens int) time.Duration {
	return c.PrefillTimeCached(promptTokens, 0)
}

// PrefillTimeCached is PrefillTime for a prompt of which cachedTokens hit the prefix cache:
// TimeScale × (PrefillOverhead + (P−C)/rate + PrefillQuadratic×((P/1024)² − (C/1024)²)).
func (c Config) PrefillTimeCached(promptTokens, cachedTokens int) time.Duration {
	return c.scale(c.PrefillOverhead + c.prefillWork(promptTokens, cachedTokens))
}

// DecodeStep is the duration of one decode step with batch running requests holding contextTokens
// in total (Σ over the batch of prompt + tokens generated so far):
// TimeScale × (DecodeBase + DecodePerSeq×batch + DecodePerKVToken×contextTokens).
// Every running request gets TokensPerStep tokens per step.
func (c Config) DecodeStep(batch int, contextTokens int) time.Duration {
	d := float64(c.DecodeBase) + float64(c.DecodePerSeq)*float64(batch) + float64(c.DecodePerKVToken)*float64(contextTokens)
	return time.Duration(d * c.TimeScale)
}

// DecodeTime is the time from first to last token of each of batch requests that decode in lockstep
// (same prompt length, same output length, nothing else running, no prefill in between): the sum of
// DecodeStep(batch, batch×(P+g)) over the decode steps, g being the tokens generated before the step
// (1, 1+k, 1+2k, … with k = TokensPerStep).
func (c Config) DecodeTime(batch, promptTokens, outputTokens int) time.Duration {
	var total time.Duration
	k := max(c.TokensPerStep, 1)
	for g := 1; g < outputTokens; g += k {
		total += c.DecodeStep(batch, batch*(promptTokens+g))
	}
	return total
}

// ITL is the mean inter-token latency as the reports define it, DecodeTime/(outputTokens−1), for
// batch requests in lockstep (see DecodeTime). With TokensPerStep=1 it equals
// DecodeStep(batch, batch×(P + O/2)) exactly.
func (c Config) ITL(batch, promptTokens, outputTokens int) time.Duration {
	if outputTokens < 2 {
		return 0
	}
	return c.DecodeTime(batch, promptTokens, outputTokens) / time.Duration(outputTokens-1)
}

// SteadyThroughput is the system output rate, in tokens/s, while batch requests with
// contextPerSeq tokens each are all decoding: batch × TokensPerStep / DecodeStep(batch, batch×ctx).
// It excludes prefill stalls (see the package documentation).
func (c Config) SteadyThroughput(batch, contextPerSeq int) float64 {
	return float64(batch*c.TokensPerStep) / c.DecodeStep(batch, batch*contextPerSeq).Seconds()
}
