package prober

// This file reads a request's speculative decoding from the response:
// how many tokens the draft proposed and how many the target model accepted.

import (
	"math"

	"github.com/valyala/fastjson"
)

// SpecDecode is one request's speculative decoding, as the engine reported
// it in the response. Acceptance is accepted ÷ draft tokens, the share of
// drafted tokens the target model kept (the bonus token a step always
// yields is not in it).
type SpecDecode struct {
	// Draft and Accepted are the request's drafted and accepted tokens,
	// when the engine reported counts (HasCounts).
	Draft, Accepted int
	HasCounts       bool
	// Ratio is the acceptance, from the counts or from a rate the engine
	// reported without them; Has is false when the response said nothing
	// usable (no drafts, or a value out of range).
	Ratio float64
	Has   bool
}

// Acceptance is the request's acceptance ratio, in [0, 1]; ok is false
// when the engine reported no speculative decoding.
func (s SpecDecode) Acceptance() (float64, bool) { return s.Ratio, s.Has }

// The field names below are the engines' own, read in their sources and
// documentation (docs/engines.md lists them with the commits):
//
//   - llama.cpp server (tools/server): timings.draft_n and
//     timings.draft_n_accepted, present when a draft model ran.
//   - vLLM (--per-request-spec-decode-metrics summary|detailed, vLLM PR
//     #48915, docs/features/per_request_metrics.md at 0377ba9ad8eb):
//     metrics.speculative_decoding.num_draft_tokens and
//     num_accepted_draft_tokens (bonus tokens excluded), with
//     draft_acceptance_rate = accepted / draft. Its other fields
//     (mean_acceptance_length, acceptance_histogram, num_spec_steps,
//     num_spec_tokens, per_step_*) are not read. An earlier draft of that
//     PR put a per-choice speculative_decoding_stats object behind
//     --per-request-spec-decode-stats; no release has it.
const (
	vllmSpecObject        = "speculative_decoding"
	vllmSpecDraftTokens   = "num_draft_tokens"
	vllmSpecAcceptedDraft = "num_accepted_draft_tokens"
	vllmSpecAcceptRate    = "draft_acceptance_rate"
	llamaDraftN           = "draft_n"
	llamaDraftNAccepted   = "draft_n_accepted"
)

// specDecodeOf reads speculative decoding from vLLM's per-request
// `metrics` object or llama.cpp's `timings`, whichever says something:
// the counts where both are usable, else vLLM's draft_acceptance_rate in
// [0, 1] alone (not when the request drafted nothing).
func specDecodeOf(metrics, timings *fastjson.Value) (SpecDecode, bool) {
	if timings != nil && timings.Type() == fastjson.TypeObject {
		if sd, ok := specFromCounts(timings.Get(llamaDraftN), timings.Get(llamaDraftNAccepted)); ok {
			return sd, true
		}
	}
	if metrics == nil || metrics.Type() != fastjson.TypeObject {
		return SpecDecode{}, false
	}
	v := metrics.Get(vllmSpecObject)
	if v == nil || v.Type() != fastjson.TypeObject {
		return SpecDecode{}, false
	}
	if sd, ok := specFromCounts(v.Get(vllmSpecDraftTokens), v.Get(vllmSpecAcceptedDraft)); ok {
		return sd, true
	}
	if n, ok := jsonCount(v.Get(vllmSpecDraftTokens)); ok && n < 1 {
		return SpecDecode{}, false // nothing drafted: a rate then says nothing
	}
	x := v.Get(vllmSpecAcceptRate)
	if x == nil || x.Type() != fastjson.TypeNumber {
		return SpecDecode{}, false
	}
	if f, err := x.Float64(); err == nil && f >= 0 && f <= 1 && !math.IsNaN(f) {
		return SpecDecode{Ratio: f, Has: true}, true
	}
	return SpecDecode{}, false
}

// specFromCounts builds a SpecDecode from drafted and accepted counts:
// both counts, at least one draft, and no more accepted than drafted.
func specFromCounts(draftV, acceptedV *fastjson.Value) (SpecDecode, bool) {
	draft, ok := jsonCount(draftV)
	if !ok || draft < 1 {
		return SpecDecode{}, false
	}
	accepted, ok := jsonCount(acceptedV)
	if !ok || accepted > draft {
		return SpecDecode{}, false
	}
	return SpecDecode{Draft: draft, Accepted: accepted, HasCounts: true, Ratio: float64(accepted) / float64(draft), Has: true}, true
}
