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

// specDecodeOf reads speculative decoding from vLLM's per-request
// `metrics` object or llama.cpp's `timings`, whichever says something.
//
// llama.cpp server (tools/server): timings.draft_n and
// timings.draft_n_accepted, present when a draft model ran.
//
// vLLM: a `speculative_decoding` object inside `metrics` is not verified in
// vLLM's source; it is read leniently: num_draft_tokens with
// num_accepted_tokens (or draft_tokens / accepted_tokens), or an
// acceptance_rate (or acceptance_ratio) in [0, 1] alone.
func specDecodeOf(metrics, timings *fastjson.Value) (SpecDecode, bool) {
	if timings != nil && timings.Type() == fastjson.TypeObject {
		if sd, ok := specFromCounts(timings.Get("draft_n"), timings.Get("draft_n_accepted")); ok {
			return sd, true
		}
	}
	if metrics == nil || metrics.Type() != fastjson.TypeObject {
		return SpecDecode{}, false
	}
	v := metrics.Get("speculative_decoding")
	if v == nil || v.Type() != fastjson.TypeObject {
		return SpecDecode{}, false
	}
	for _, names := range [][2]string{{"num_draft_tokens", "num_accepted_tokens"}, {"draft_tokens", "accepted_tokens"}} {
		if sd, ok := specFromCounts(v.Get(names[0]), v.Get(names[1])); ok {
			return sd, true
		}
	}
	for _, name := range []string{"acceptance_rate", "acceptance_ratio"} {
		x := v.Get(name)
		if x == nil || x.Type() != fastjson.TypeNumber {
			continue
		}
		if f, err := x.Float64(); err == nil && f >= 0 && f <= 1 && !math.IsNaN(f) {
			return SpecDecode{Ratio: f, Has: true}, true
		}
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
