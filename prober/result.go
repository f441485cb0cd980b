package prober

// This file holds one probe's Result, its outcome Kind and failure Reason.

import "time"

// Kind is the outcome class of one probe; it is the `result` label of
// slaprobe_probes_total.
type Kind string

const (
	KindSuccess     Kind = "success"
	KindError       Kind = "error"
	KindShortOutput Kind = "short_output" // the stream finished with fewer tokens than asked
)

// MinDecodeTokens is the fewest output tokens a short answer needs for its
// ITL and decode speed to count: a mean over fewer token gaps is mostly the
// jitter of one or two of them. A full-length answer always counts.
const MinDecodeTokens = 16

// Reason says why a probe failed. The set is small and fixed: it is the
// `reason` label of slaprobe_probe_errors_total.
type Reason string

const (
	ReasonNone              Reason = ""
	ReasonConnectionRefused Reason = "connection_refused" // nothing listens at the target
	ReasonConnection        Reason = "connection_error"   // reset, unreachable and other transport failures
	ReasonDNS               Reason = "dns_error"          // the target's host name did not resolve
	ReasonTLS               Reason = "tls_error"          // TLS handshake failed: bad or untrusted certificate, not TLS
	ReasonTimeout           Reason = "timeout"            // the scenario's timeout passed
	ReasonStall             Reason = "stall"              // the stream started, then sent nothing for the stall timeout
	ReasonHTTP4xx           Reason = "http_4xx"
	ReasonHTTP5xx           Reason = "http_5xx"
	ReasonStreamError       Reason = "stream_error"    // an {"error": ...} event inside a 200 stream
	ReasonStreamCut         Reason = "stream_cut"      // the stream ended before [DONE]
	ReasonMalformedChunk    Reason = "malformed_chunk" // a data line that is not the JSON we expect
	ReasonOversizedLine     Reason = "oversized_line"  // an SSE line longer than the reader's limit
	ReasonMissingUsage      Reason = "missing_usage"   // no usage reported, so tokens cannot be counted
	ReasonCalibration       Reason = "calibration"     // the prompt could not be sized to the scenario
	ReasonTooManyTokens     Reason = "too_many_tokens" // the server generated more tokens than max_tokens asked for
	// ReasonPromptTruncated: the server read fewer prompt tokens than were
	// sent, because it cuts prompts to its context window and answers anyway
	// (its TTFT is that of a shorter prompt, so it is not recorded), or it
	// refused the prompt as longer than its context (llama.cpp server's 400
	// exceed_context_size_error): either way the scenario does not fit.
	ReasonPromptTruncated Reason = "prompt_truncated"
	// ReasonAnswerTooLarge: the text a conversation keeps to replay grew past
	// the probe's cap (global.max_answer_bytes); the conversation stops there.
	ReasonAnswerTooLarge Reason = "answer_too_large"
	// ReasonRedirect: the server answered a 3xx. No redirect is followed, so
	// the credentials of a target never go to another origin; the error
	// names the Location.
	ReasonRedirect Reason = "redirect"
)

// Reasons lists every Reason except ReasonNone, so counters can be initialised.
var Reasons = []Reason{
	ReasonConnectionRefused, ReasonConnection, ReasonDNS, ReasonTLS, ReasonTimeout, ReasonStall,
	ReasonHTTP4xx, ReasonHTTP5xx, ReasonStreamError, ReasonStreamCut,
	ReasonMalformedChunk, ReasonOversizedLine, ReasonMissingUsage, ReasonCalibration,
	ReasonTooManyTokens, ReasonPromptTruncated, ReasonAnswerTooLarge, ReasonRedirect,
}

// TargetDown reports whether r means the target could not be reached at
// all (as opposed to answering badly or slowly): the scheduler backs off
// from such a target.
func (r Reason) TargetDown() bool {
	switch r {
	case ReasonConnectionRefused, ReasonConnection, ReasonDNS, ReasonTLS:
		return true
	}
	return false
}

// Result is everything one probe measured. Durations are computed from
// monotonic timestamps taken when the bytes arrived.
type Result struct {
	Target   string
	Model    string
	Scenario string
	API      API // the endpoint the probe was sent to
	// LengthClass is the prompt-length class of a probe drawn by
	// Scenario.Shape ("1k" … "96k"); empty for every other probe.
	LengthClass string

	Kind   Kind
	Reason Reason
	Err    error // detail for the log; nil on success
	// RetryAfter is the server's Retry-After on a 429 or 503 answer (0 when
	// absent); the scheduler sends no probe to the target before it passes.
	RetryAfter time.Duration

	ResponseID   string    // the `id` of the streamed chunks, to match server-side traces
	TraceID      string    // W3C trace id the probe sent in traceparent (hex); "" before the request was built
	RequestID    string    // the X-Request-Id the probe sent
	Start        time.Time // t0: just before the request was written
	FirstByte    time.Time // arrival of the response's first byte (headers); zero if none came
	FirstToken   time.Time // arrival of the first chunk carrying generated output
	FirstContent time.Time // arrival of the first chunk carrying non-reasoning content (zero if none)
	LastToken    time.Time // arrival of the last chunk carrying generated output
	Reasoning    bool      // the stream carried reasoning tokens before content

	// Stamps is where FirstByte, FirstToken, FirstContent and LastToken came
	// from (kstamp.go); "" when the stream was not read.
	Stamps StampSource

	PromptTokens     int // usage.prompt_tokens
	OutputTokens     int // usage.completion_tokens (final)
	RequestedTokens  int // max_tokens asked for
	FirstChunkTokens int // tokens the first output chunk carried (from continuous usage; 1 if unknown)
	CachedTokens     int // usage.prompt_tokens_details.cached_tokens, when reported
	CachedReported   bool
	ContinuousUsage  bool    // the server sent usage on every chunk
	ChunkTokens      []int32 // tokens per output-bearing chunk (only when ContinuousUsage)
	FinishReason     string
	PromptLengthOK   bool // PromptTokens within tolerance of the scenario's input tokens

	// Engine is the engine's own timing of the request: from the response
	// when the server sends it (Source TimingResponse), TimingNone when it
	// did not; a trace join may later replace it (TimingTrace).
	Engine EngineTiming
	// SpecDecode is the speculative decoding of the request as the
	// response reports it (vLLM's per-request metrics, llama.cpp's
	// timings); zero when it reports none.
	SpecDecode SpecDecode

	// Semantic canaries: what the stream says about the server's setup.
	//
	// FirstChunkKind is what the first output chunk carried: content,
	// reasoning or tool_call; a reasoning model whose first chunk is content
	// has its reasoning parser switched off.
	FirstChunkKind ChunkKind
	// OutputChunks counts the chunks that carried output.
	OutputChunks int
	// UsageMismatch is set when usage.completion_tokens disagrees with what
	// the stream carried: fewer tokens than output chunks (each carries at
	// least one), or continuous usage whose last count differs from the
	// final one.
	UsageMismatch bool

	// Conversation scenarios (Scenario.Conversation): a probe is a conversation.
	//
	// Turn is the turn this result measures: 0 for a cold probe, 1 for the
	// priming turn, 2 and up for follow-ups.
	Turn int
	// Earlier holds, on the result a warm probe returns (its last turn), the
	// turns before it, priming turn first.
	Earlier []Result
	// PrimeTTFT is the TTFT of the conversation's priming turn, on
	// follow-ups: the cold reference their TTFT saving is measured against.
	PrimeTTFT time.Duration
	// SeenTokens is, on a follow-up, how much of the conversation the engine
	// had already seen: the turn before's prompt and its answer, as the
	// server counted them (prompt plus completion tokens). The follow-up
	// replays that answer, so all of it is a prefix the cache may hold.
	SeenTokens int
	// WantPromptTokens is the prompt length this turn was checked against
	// (PromptLengthOK): the scenario's input tokens on a cold probe or a
	// priming turn; on a follow-up, the turn before's prompt plus its
	// answer's completion tokens plus the calibrated new message.
	WantPromptTokens int
	// Answer is the content text the server streamed, kept on the turns of a
	// conversation that another turn follows (it replays it); "" otherwise.
	Answer string
	// ConversationID is the conversation's own random id, on every turn:
	// the value of its id_header when one is set.
	ConversationID string
	// ThinkTime is, on a follow-up, the pause drawn before it: from the
	// end of the turn before's answer to this turn's request.
	ThinkTime time.Duration
	// PrimePromptTokens is, on a follow-up, the priming turn's prompt as the
	// server counted it: with PrimeTTFT, the cold prefill pace that infers
	// the cached share where the server reports none (SeenCached).
	PrimePromptTokens int
}

// ConversationCache classes a follow-up by the share of what the engine had
// already seen of its conversation that came from the cache: the cache label
// of slaprobe_conversation_turns_total.
type ConversationCache string

// The classes: hit at least HitShare, miss under MissShare, partial between;
// unknown when the share is not known (SeenCachedShare).
const (
	CacheHitTurn     ConversationCache = "hit"
	CachePartialTurn ConversationCache = "partial"
	CacheMissTurn    ConversationCache = "miss"
	CacheUnknownTurn ConversationCache = "unknown"

	HitShare  = 0.9
	MissShare = 0.1
)

// ConversationCaches lists every class.
var ConversationCaches = []ConversationCache{CacheHitTurn, CachePartialTurn, CacheMissTurn, CacheUnknownTurn}

// CachedMethod says where a follow-up's cached share came from.
type CachedMethod string

const (
	// CachedReportedMethod: the server's own count (usage's cached_tokens,
	// Messages' cache_read_input_tokens, llama.cpp's timings.cache_n).
	CachedReportedMethod CachedMethod = "reported"
	// CachedTTFTMethod: inferred from the turn's TTFT against the
	// conversation's own cold priming turn (InferSeenCachedShare).
	CachedTTFTMethod CachedMethod = "ttft"
	// CachedNoMethod: neither (a cold probe, a priming turn, a failed turn).
	CachedNoMethod CachedMethod = ""
)

// SeenCachedShare is the share of what the engine had already seen of the
// conversation (SeenTokens) that the server served from its cache, capped
// at 1 (the new tokens' full blocks cannot be cached, but a server may count
// differently); ok is false on a cold probe or priming turn, or when the
// server did not report cached tokens and the share cannot be inferred.
// SeenCached also says how the share was found.
func (r *Result) SeenCachedShare() (share float64, ok bool) {
	share, m := r.SeenCached()
	return share, m != CachedNoMethod
}

// SeenCached is SeenCachedShare with the method that found it: the server's
// count where it reports one, else InferSeenCachedShare.
func (r *Result) SeenCached() (share float64, method CachedMethod) {
	if !r.FollowUp() || r.SeenTokens <= 0 {
		return 0, CachedNoMethod
	}
	if r.CachedReported {
		return min(float64(r.CachedTokens)/float64(r.SeenTokens), 1), CachedReportedMethod
	}
	if share, ok := r.InferSeenCachedShare(); ok {
		return share, CachedTTFTMethod
	}
	return 0, CachedNoMethod
}

// InferSeenCachedShare is InferSeenCachedShareBound's share where its
// stated error is at most InferMaxError; ok is false otherwise: the share
// is then unknown rather than a wrong class.
func (r *Result) InferSeenCachedShare() (share float64, ok bool) {
	share, bound, ok := r.InferSeenCachedShareBound()
	if !ok || bound > InferMaxError {
		return 0, false
	}
	return share, true
}

// The stated error of a share inferred from TTFT: a fixed cost per request
// of InferFixedSteps decode steps (the turn's ITL) that the inference cannot
// see, and the largest error still reported (InferMaxError). The simulated
// engine's default, modelled on vLLM on one H100, has 70 ms of fixed prefill
// cost against a 6 ms ITL (docs/conversations.md has the measured errors).
const (
	InferFixedSteps = 10
	InferMaxError   = 0.1
)

// InferSeenCachedShareBound infers SeenCachedShare from timing alone, for a
// server that does not count cached tokens, with the bound of its error.
// Prefill time grows with the tokens prefilled, so the conversation's own
// cold priming turn (PrimeTTFT for PrimePromptTokens) gives the pace, and
// the follow-up's TTFT at that pace is what it prefilled, U; the rest of its
// prompt came from the cache:
//
//	U     = PrimePromptTokens × (TTFT − o) / (PrimeTTFT − o)
//	share = (PromptTokens − U) / SeenTokens, clamped to [0, 1]
//
// o is the turn's ITL (the engine's one forward pass that even a fully
// cached prompt costs), at most half the priming turn's TTFT. What else is
// fixed per request (the round trip, tokenization, scheduling) counts as
// prefilled tokens: a hit reads low and a miss a little high, by about
// that cost over the priming turn's TTFT times PrimePromptTokens/SeenTokens.
// bound is that error for a fixed cost of InferFixedSteps·o:
//
//	bound = InferFixedSteps × o / (PrimeTTFT − o) × PrimePromptTokens / SeenTokens
//
// small where the cold prefill is long against a decode step, large on
// small prompts and a fast prefill. ok is false unless r is a successful
// follow-up with a measured decode (o) and its priming turn known.
func (r *Result) InferSeenCachedShareBound() (share, bound float64, ok bool) {
	if !r.FollowUp() || r.Kind != KindSuccess || !r.DecodeMeasured() || r.PrimeTTFT <= 0 || r.PrimePromptTokens <= 0 ||
		r.PromptTokens <= 0 || r.SeenTokens <= 0 {
		return 0, 0, false
	}
	o := min(r.ITL(), r.PrimeTTFT/2)
	uncached := float64(r.PrimePromptTokens) * float64(max(r.TTFT()-o, 0)) / float64(r.PrimeTTFT-o)
	share = min(max((float64(r.PromptTokens)-uncached)/float64(r.SeenTokens), 0), 1)
	bound = InferFixedSteps * float64(o) / float64(r.PrimeTTFT-o) * float64(r.PrimePromptTokens) / float64(r.SeenTokens)
	return share, bound, true
}

// Recomputed is what a follow-up cost its engine for want of cache: history
// is what it could have reused (SeenTokens, everything before its new
// tokens), recomputed the prompt tokens it prefilled beyond its new tokens,
// prompt − cached − new with new = prompt − history, floored at 0, which is
// history × (1 − SeenCachedShare). The cached count is the server's where it
// reports one, else inferred from TTFT (InferSeenCachedShare); method is
// CachedNoMethod, and both 0, where the share is unknown (the unknown class
// of ConversationCache): such a turn counts in neither.
func (r *Result) Recomputed() (history, recomputed float64, method CachedMethod) {
	share, m := r.SeenCached()
	if m == CachedNoMethod {
		return 0, 0, m
	}
	history = float64(r.SeenTokens)
	return history, max(history*(1-share), 0), m
}

// ConversationCache classes a follow-up by SeenCachedShare.
func (r *Result) ConversationCache() ConversationCache {
	share, ok := r.SeenCachedShare()
	switch {
	case !ok:
		return CacheUnknownTurn
	case share >= HitShare:
		return CacheHitTurn
	case share < MissShare:
		return CacheMissTurn
	}
	return CachePartialTurn
}

// FollowUp reports whether r is a warm follow-up turn, which is meant to hit
// the prefix cache.
func (r *Result) FollowUp() bool { return r.Turn >= 2 }

// CachedShare is the share of the prompt the server served from its prefix
// cache (cached_tokens / prompt_tokens); ok is false when the server did not
// report cached tokens.
func (r *Result) CachedShare() (share float64, ok bool) {
	if !r.CachedReported || r.PromptTokens <= 0 {
		return 0, false
	}
	return min(float64(r.CachedTokens)/float64(r.PromptTokens), 1), true
}

// TTFTSaved is what a follow-up's TTFT saved against its conversation's
// priming turn (negative when it took longer); ok is false for other results.
func (r *Result) TTFTSaved() (saved time.Duration, ok bool) {
	if !r.FollowUp() || r.PrimeTTFT <= 0 || r.Kind != KindSuccess {
		return 0, false
	}
	return r.PrimeTTFT - r.TTFT(), true
}

// ChunkKind is what an output chunk carried.
type ChunkKind string

// Chunk kinds, the kind label of slaprobe_probe_first_chunk_total.
const (
	ChunkContent   ChunkKind = "content"
	ChunkReasoning ChunkKind = "reasoning"
	ChunkToolCall  ChunkKind = "tool_call"
)

// ChunkKinds lists every kind.
var ChunkKinds = []ChunkKind{ChunkContent, ChunkReasoning, ChunkToolCall}

// CacheHit reports whether the server served part of the prompt from its
// prefix cache, which makes a cold probe's prefill timing worthless (and is
// what a warm follow-up wants).
func (r *Result) CacheHit() bool { return r.CachedTokens > 0 }

// Timed reports whether r's TTFT, E2E and prefill speed are measurements:
// the request completed and at least one chunk carried output. That holds
// for a short answer too (the server, not the prober, chose to stop early),
// but not for a failed probe or an empty answer.
func (r *Result) Timed() bool {
	return (r.Kind == KindSuccess || r.Kind == KindShortOutput) && !r.FirstToken.IsZero() &&
		!r.LastToken.Before(r.FirstToken)
}

// DecodeMeasured reports whether r's ITL and decode speed are measurements:
// Timed, with at least one token gap after the first chunk, and either the
// full answer or at least MinDecodeTokens tokens of a short one.
func (r *Result) DecodeMeasured() bool {
	if !r.Timed() || r.decodeIntervals() < 1 || r.DecodeTime() <= 0 {
		return false
	}
	return r.Kind == KindSuccess || r.OutputTokens >= MinDecodeTokens
}

// Short reports whether the server ended the answer before the tokens asked
// for (it ignored ignore_eos, or has no such option).
func (r *Result) Short() bool { return r.Kind == KindShortOutput }

// TTFT is the time to the first generated token.
func (r *Result) TTFT() time.Duration { return r.FirstToken.Sub(r.Start) }

// TTFC is the time to the first non-reasoning token; zero when there was none.
func (r *Result) TTFC() time.Duration {
	if r.FirstContent.IsZero() {
		return 0
	}
	return r.FirstContent.Sub(r.Start)
}

// E2E is the time from t0 to the last token.
func (r *Result) E2E() time.Duration { return r.LastToken.Sub(r.Start) }

// E2EAtRequested is the end-to-end latency judged against the scenario's
// E2E threshold: the answer's E2E had it been as long as asked, TTFT plus
// ITL for every token gap the asked-for answer has (RequestedTokens - the
// first chunk's tokens). For a full answer that is E2E exactly; for a
// short one it extends the measured decode pace to the asked length, so a
// server that stops early is held to the same threshold as one that does
// not. ok is false when the pace is not known (DecodeMeasured is false) on
// a short answer.
func (r *Result) E2EAtRequested() (d time.Duration, ok bool) {
	if !r.Timed() {
		return 0, false
	}
	if r.Kind == KindSuccess || r.RequestedTokens <= r.OutputTokens {
		return r.E2E(), true
	}
	if !r.DecodeMeasured() {
		return 0, false
	}
	k := max(r.FirstChunkTokens, 1)
	pace := float64(r.DecodeTime()) / float64(r.decodeIntervals())
	return r.TTFT() + time.Duration(pace*float64(r.RequestedTokens-k)), true
}

// DecodeTime is the time from the first to the last token.
func (r *Result) DecodeTime() time.Duration { return r.LastToken.Sub(r.FirstToken) }

// decodeIntervals is the number of token intervals inside DecodeTime: n-1
// when tokens arrive one per chunk. When continuous usage shows the first
// chunk carried k tokens (speculative decoding, stream-interval), those k
// tokens all arrived at FirstToken, so only n-k intervals lie after it.
func (r *Result) decodeIntervals() int {
	k := r.FirstChunkTokens
	if k < 1 {
		k = 1
	}
	return r.OutputTokens - k
}

// ITL is the mean inter-token latency, decode_time / (n-1); see decodeIntervals.
func (r *Result) ITL() time.Duration {
	n := r.decodeIntervals()
	if n < 1 {
		return 0
	}
	return r.DecodeTime() / time.Duration(n)
}

// DecodeSpeed is the per-user decode speed in tokens/s, (n-1) / decode_time.
func (r *Result) DecodeSpeed() float64 {
	d := r.DecodeTime().Seconds()
	n := r.decodeIntervals()
	if d <= 0 || n < 1 {
		return 0
	}
	return float64(n) / d
}

// PrefillSpeed is prompt tokens / TTFT in tokens/s.
func (r *Result) PrefillSpeed() float64 {
	t := r.TTFT().Seconds()
	if t <= 0 {
		return 0
	}
	return float64(r.PromptTokens) / t
}
